"""The per-fleet monitor loop (docs/runtime.md §5): ensure, loop, tick, cadence, wake line, scan.

Importing this package is cheap; each submodule imports what it needs lazily.
"""
