"""rollouts: a rollout's plan and progress, so a crash mid-rollout leaves what `rollout --resume` or `--abort` acts on

Revision ID: rollouts
Revises: running_jobs
Create Date: 2026-12-04

`rollouts`: one row per rollout: its profile, plan (hosts, batches, gate, soak), progress per host (what it
served before, how far it got, what was measured), state, and the process that runs it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]  # Alembic's

revision = "rollouts"
down_revision = "running_jobs"
branch_labels = None
depends_on = None

_EPOCH = sa.Float(precision=53)


def upgrade() -> None:
    op.create_table(
        "rollouts",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("profile", sa.Text, nullable=False),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("plan", sa.Text, nullable=False),
        sa.Column("progress", sa.Text, nullable=False),
        sa.Column("started_at", _EPOCH, nullable=False),
        sa.Column("updated_at", _EPOCH, nullable=False),
        sa.Column("pid", sa.Integer),
        sa.Column("boot_id", sa.Text),
        sa.Column("pid_start", sa.BigInteger),
        sa.Column("replica", sa.Text),
    )
    op.create_index("rollouts_state", "rollouts", ["state"])


def downgrade() -> None:
    op.drop_index("rollouts_state", "rollouts")
    op.drop_table("rollouts")
