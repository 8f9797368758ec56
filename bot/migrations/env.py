"""Alembic's entry point: the store passes its connection (in a transaction it began) as
`config.attributes["connection"]`; every pending revision runs inside that one transaction, so a failing
one leaves the schema as it was (PostgreSQL's DDL is transactional; SQLite's is too, on a connection that
issued BEGIN itself, which the store's does)."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
# batch mode: an ALTER that SQLite cannot do in place (drop or retype a column) is a table copy, in the
# same transaction
context.configure(connection=connection, render_as_batch=True, transactional_ddl=True)
with context.begin_transaction():
    context.run_migrations()
