"""`from cafleet.db import tx` then `with tx.read(conn):` / `with tx.write(conn):`."""

from cafleet.db.runtime import tx as _tx

read = _tx.read
write = _tx.write

__all__ = ["read", "write"]
