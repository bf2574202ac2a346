"""Pytest plugin for the tmux harness (runtime.md §6). Filled in by the mux work."""
