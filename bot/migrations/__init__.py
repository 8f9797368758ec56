"""The store's schema migrations (Alembic), run by the store (bot/store/schema.py) when it opens a database.

env.py is configured programmatically: the store hands Alembic its open connection, already in the one
transaction every pending revision runs in (no alembic.ini). `versions/` holds the revisions; the first,
`baseline`, is the schema of the releases before migrations and brings any of their state files up to it.
"""
