"""cafleet: message broker and member registry for fleets of coding agents in tmux.

Importing this package must stay cheap: it imports only the standard library.
"""

__version__ = "0.1.0"
