"""Database layer: schema, connections and transactions, diagnosis, migrations."""
