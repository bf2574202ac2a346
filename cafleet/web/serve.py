"""Run the WebUI app on one uvicorn process, on a socket the command already bound."""

from __future__ import annotations

import socket

from cafleet import signals
from cafleet.web.app import ServerConfig, create_app


def serve(config: ServerConfig, sock: socket.socket) -> None:
    """Serve until SIGINT/SIGTERM; uvicorn finishes the requests in flight, then returns."""
    import uvicorn

    class Server(uvicorn.Server):
        async def on_tick(self, counter: int) -> bool:
            # A signal that arrived before uvicorn installed its handlers was recorded by
            # cafleet's own (docs/cli.md §1.4); it stops the server the same way.
            if signals.stop_requested():
                return True
            return bool(await super().on_tick(counter))

    app = create_app(config)
    server = Server(
        uvicorn.Config(
            app,
            lifespan="off",
            log_level="warning",
            access_log=False,
            server_header=False,
            # The page polls every few seconds; keep its connection open between polls.
            timeout_keep_alive=30,
        )
    )
    try:
        server.run(sockets=[sock])
    finally:
        app.close()
