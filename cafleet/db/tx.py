"""`from cafleet.db import tx` then `with tx.read(conn):` / `with tx.write(conn):`, or
`tx.write_one(conn, statement, params)` for a write of one statement."""

from cafleet.db.runtime import tx as _tx

read = _tx.read
write = _tx.write
write_one = _tx.write_one

__all__ = ["read", "write", "write_one"]
