"""running_jobs: the jobs each replica runs, so a Cancel press that reaches another replica still stops them

Revision ID: running_jobs
Revises: replicas
Create Date: 2026-12-04

`jobs`: one row per running job (its replica, command and requester); `cancel_by`/`cancel_at` are set by the
replica that received the press, and the running replica polls for them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]  # Alembic's

revision = "running_jobs"
down_revision = "replicas"
branch_labels = None
depends_on = None

_EPOCH = sa.Float(precision=53)


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("replica", sa.Text, nullable=False),
        sa.Column("command", sa.Text, nullable=False),
        sa.Column("requester", sa.Text, nullable=False),
        sa.Column("started_at", _EPOCH, nullable=False),
        sa.Column("cancel_by", sa.Text),
        sa.Column("cancel_at", _EPOCH),
    )
    op.create_index("jobs_replica", "jobs", ["replica"])


def downgrade() -> None:
    op.drop_index("jobs_replica", "jobs")
    op.drop_table("jobs")
