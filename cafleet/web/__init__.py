"""The WebUI (`cafleet server`, runtime.md §7.3): a FastAPI app over the synchronous workflows
and repository, and the static page it serves. Only `cafleet server` imports this package, and
with it FastAPI, Starlette, pydantic and uvicorn (cli.md §3.4)."""
