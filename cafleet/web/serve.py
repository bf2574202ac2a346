"""Run the WebUI app on one uvicorn process, on a socket the command already bound."""

from __future__ import annotations

import socket
from typing import Any

from cafleet.web.app import ServerConfig, create_app


def serve(config: ServerConfig, sock: socket.socket) -> None:
    """Serve until SIGINT/SIGTERM; uvicorn finishes the requests in flight, then returns."""
    import uvicorn

    app: Any = create_app(config)
    server = uvicorn.Server(
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
    server.run(sockets=[sock])
