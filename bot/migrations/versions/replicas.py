"""replicas: more than one bot on one store — who is alive and leads, host locks as leases, Slack deliveries seen

Revision ID: replicas
Revises: baseline
Create Date: 2026-12-03

`replicas`: one row per running bot (its id, machine, pid, start, last heartbeat, whether it leads).
`locks.replica`: which replica holds a host lock; its heartbeat renews `locks.heartbeat` (the lease).
`plans`: a plan awaiting confirmation, for the replica its button reaches.
`slack_seen`: Slack's ids of the deliveries some replica took (a retry that lands on another replica is
answered, not run again).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]  # Alembic's

revision = "replicas"
down_revision = "baseline"
branch_labels = None
depends_on = None

_EPOCH = sa.Float(precision=53)


def upgrade() -> None:
    op.create_table(
        "replicas",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("machine", sa.Text, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", _EPOCH, nullable=False),
        sa.Column("heartbeat", _EPOCH, nullable=False),
        sa.Column("leader", sa.Integer, nullable=False, server_default="0"),
        sa.Column("detail", sa.Text, nullable=False, server_default=""),
    )
    op.add_column("locks", sa.Column("replica", sa.Text))
    op.create_table(
        "slack_seen",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("at", _EPOCH, nullable=False),
        sa.Column("replica", sa.Text, nullable=False),
        sa.Column("what", sa.Text, nullable=False, server_default=""),
    )
    op.create_index("slack_seen_at", "slack_seen", ["at"])
    op.create_table(  # a plan awaiting its confirm button, which Slack may deliver to any replica
        "plans",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("command", sa.Text, nullable=False),
        sa.Column("team", sa.Text),
        sa.Column("user", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("thread_ts", sa.Text),
        sa.Column("expires_at", _EPOCH, nullable=False),
        sa.Column("message_ts", sa.Text),
        sa.Column("state", sa.Text, nullable=False, server_default="pending"),
    )


def downgrade() -> None:
    op.drop_table("plans")
    op.drop_index("slack_seen_at", "slack_seen")
    op.drop_table("slack_seen")
    with op.batch_alter_table("locks") as batch:
        batch.drop_column("replica")
    op.drop_table("replicas")
