"""Workflows: what a command does beyond one repository call, shared by the CLI and the WebUI.

A workflow takes the caller's validated connection and settings, runs the repository, delivery
and monitor pieces in order, and returns a typed result or raises a typed error whose str() is
the text the CLI prints. It prints nothing itself: warnings go to the caller's ``warn`` callback
as they happen. Below the CLI and the server, above the broker, delivery, mux and monitor layers;
its modules import those lazily, so a command that needs no tmux imports none of it.
"""
