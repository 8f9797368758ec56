"""baseline: the schema of the releases before migrations (CREATE TABLE IF NOT EXISTS and ALTER TABLE at open)

Revision ID: baseline
Revises:
Create Date: 2026-12-03

A fresh database gets every table. A state file of an earlier release (no alembic_version) has some of them,
maybe without the columns later releases added by ALTER TABLE: the missing tables, columns and indexes are
added, rows kept, and the file is then at this revision like any other.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "tables", "upgrade"]  # Alembic's

revision = "baseline"
down_revision = None
branch_labels = None
depends_on = None

# ids: INTEGER PRIMARY KEY AUTOINCREMENT on SQLite (as before), a 64-bit identity on PostgreSQL
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_EPOCH = sa.Float(precision=53)  # epoch seconds: a double (PostgreSQL's REAL is 4 bytes)


def _id() -> sa.Column[int]:
    return sa.Column("id", _ID, primary_key=True, autoincrement=True)


def tables(meta: sa.MetaData) -> list[sa.Table]:
    """Every table at this revision, with its indexes."""
    auto: dict[str, Any] = {"sqlite_autoincrement": True}
    locks = sa.Table(
        "locks", meta,
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("operation", sa.Text, nullable=False),
        sa.Column("started_at", _EPOCH, nullable=False),
        sa.Column("pid", sa.Integer),
        sa.Column("boot_id", sa.Text),
        sa.Column("heartbeat", _EPOCH),
        sa.Column("pid_start", sa.BigInteger),  # clock ticks since boot: past 2^31 after 248 days at 100 Hz
    )
    deployments = sa.Table(
        "deployments", meta, _id(),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("profile", sa.Text, nullable=False),
        sa.Column("fingerprint", sa.Text, nullable=False),
        sa.Column("pid", sa.Integer),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("started_at", _EPOCH, nullable=False),
        sa.Column("finished_at", _EPOCH),
        sa.Column("detail", sa.Text, nullable=False, server_default="{}"),
        sa.Column("holder_pid", sa.Integer),
        sa.Column("holder_boot", sa.Text),
        sa.Column("holder_start", sa.BigInteger),
        sa.Index("deployments_host", "host", "id"),
        **auto,
    )
    samples = sa.Table(
        "samples", meta, _id(),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("at", _EPOCH, nullable=False),
        sa.Column("up", sa.Integer, nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Index("samples_host", "host", "at"),
        **auto,
    )
    incidents = sa.Table(
        "incidents", meta, _id(),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("opened_at", _EPOCH, nullable=False),
        sa.Column("resolved_at", _EPOCH),
        sa.Column("channel", sa.Text),
        sa.Column("ts", sa.Text),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("timeline", sa.Text, nullable=False, server_default="[]"),
        sa.Column("active", sa.Text, nullable=False, server_default="{}"),
        **auto,
    )
    open_only = sa.text("state != 'resolved'")
    sa.Index("incidents_open_key", incidents.c.key, unique=True, sqlite_where=open_only, postgresql_where=open_only)
    log_cursors = sa.Table(
        "log_cursors", meta,
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("head", sa.Text, nullable=False),
        sa.Column("offset", sa.BigInteger, nullable=False),
        sa.Column("at", _EPOCH, nullable=False),
    )
    report_runs = sa.Table(
        "report_runs", meta,
        sa.Column("report", sa.Text, primary_key=True),
        sa.Column("period", sa.Text, primary_key=True),
        sa.Column("at", _EPOCH, nullable=False),
        sa.Column("posted_at", _EPOCH),
        sa.Column("channel", sa.Text),
        sa.Column("ts", sa.Text),
    )
    startup_runs = sa.Table(
        "startup_runs", meta, _id(),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("profile", sa.Text, nullable=False),
        sa.Column("at", _EPOCH, nullable=False),
        sa.Column("ready_seconds", _EPOCH, nullable=False),
        sa.Column("phases", sa.Text, nullable=False),
        sa.Index("startup_runs_key", "host", "profile", "id"),
        **auto,
    )
    audit = sa.Table(
        "audit", meta, _id(),
        sa.Column("started_at", _EPOCH, nullable=False),
        sa.Column("finished_at", _EPOCH),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("team", sa.Text),
        sa.Column("user", sa.Text),
        sa.Column("channel", sa.Text),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("command", sa.Text),
        sa.Column("plan_id", sa.Text),
        sa.Column("result", sa.Text, nullable=False, server_default="started"),
        sa.Column("detail", sa.Text, nullable=False, server_default=""),
        **auto,
    )
    health = sa.Table(  # the /healthz write probe's one row
        "health", meta,
        sa.Column("id", sa.Integer, sa.CheckConstraint("id = 1"), primary_key=True, autoincrement=False),
        sa.Column("at", _EPOCH),
    )
    return [locks, deployments, samples, incidents, log_cursors, report_runs, startup_runs, audit, health]


def upgrade() -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    present = set(inspector.get_table_names())
    for table in tables(sa.MetaData()):
        if table.name not in present:
            table.create(bind)  # with its indexes
        else:
            _bring_forward(table, inspector)


def _bring_forward(table: sa.Table, inspector: sa.Inspector) -> None:
    """An earlier release's table: the columns and indexes it lacks (what its ALTER TABLEs added at open)."""
    columns = {c["name"] for c in inspector.get_columns(table.name)}
    for column in table.columns:
        if column.name in columns:
            continue
        op.add_column(table.name, column._copy())
        if (table.name, column.name) == ("report_runs", "posted_at"):
            # claimed and posted became two steps: what an older release claimed, it had posted
            op.execute("UPDATE report_runs SET posted_at = at")
    indexes = {i["name"] for i in inspector.get_indexes(table.name)}
    for index in table.indexes:
        if index.name not in indexes:
            index.create(op.get_bind())


def downgrade() -> None:
    raise NotImplementedError("baseline is the first revision: there is no earlier schema to go back to")
