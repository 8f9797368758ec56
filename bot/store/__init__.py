"""The state store: host locks, deployments, and the record of what ran, over SQLAlchemy Core.

`settings.state` is a path (one SQLite file, the embedded default) or a SQLAlchemy URL (PostgreSQL, for more
than one replica). Opening the store brings its schema to the newest Alembic revision (bot/migrations), in
one transaction: a revision that fails leaves the schema as it was and the store does not open.

Each call is one short transaction that writes as if alone: SQLite's BEGIN IMMEDIATE, a transaction-scoped
advisory lock on PostgreSQL (so a read-then-write, like taking a lock, is never raced by another replica).
On SQLite, WAL mode lets the bot, the scheduler and a CLI read while another writes. Chat turns queue
their audit rows for one writer thread (`store.audit.queue`), which commits what is queued in one transaction;
what a row is for waits for `AuditRow.committed()`.

One module per table group, each a small class over the one connection holder (database.py); facade.py's
`Store` opens the database and hands each use case the group it needs (`store.locks`, `store.audit`, ...):
  engine.py       where the state lives (state_target), the SQLite and PostgreSQL engines, the database errors
  schema.py       the Alembic migrations run at open, and the legacy schema they bring forward
  database.py     the connection holder: one writing transaction at a time, the read-only reader
  holders.py      which process holds a row (boot id, PID start) and whether it is gone
  locks.py        host locks as leases           deployments.py  deployment rows
  startups.py     startup phases (estimates)     audit.py        the audit rows and their writer thread
  incidents.py    incidents and their alerts     watches.py      watch samples and log cursors
  reports.py      idempotent report posts        replicas.py     replica heartbeats
  deliveries.py   Slack delivery ids             plans.py        plans awaiting their confirm button
  jobs.py         running jobs and cancels       rollouts.py     the rollout record
"""
