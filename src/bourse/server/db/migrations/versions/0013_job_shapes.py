"""job shapes and pending timeouts: placement skips whole shapes of jobs that cannot run

``shape`` is a digest of a job's Compute (``core.placement.shape_of``), filled here for jobs
that may still be placed; ``pending_until`` ends a job's wait for a node (its
``pending_timeout_s``).

Revision ID: 0013
Revises: 0012
"""

import hashlib
import json

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None
OPEN = ("PENDING", "SCHEDULED", "STARTING", "RUNNING")


def _shape(compute: object) -> str:  # as core.placement.shape_of, frozen here
    text = json.dumps(compute, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("shape", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("pending_until", sa.Float(), nullable=True))
    op.create_index("ix_jobs_pending", "jobs", ["state", "project_id", "shape", "created_at"])
    op.create_index("ix_jobs_state_pending_until", "jobs", ["state", "pending_until"])
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT id, spec FROM jobs WHERE state IN :open").bindparams(
        sa.bindparam("open", expanding=True)), {"open": list(OPEN)}).all()
    for job_id, stored in rows:
        spec = json.loads(stored) if isinstance(stored, str) else stored
        bind.execute(sa.text("UPDATE jobs SET shape = :shape WHERE id = :id"),
                     {"shape": _shape((spec or {}).get("compute") or {}), "id": job_id})


def downgrade() -> None:
    op.drop_index("ix_jobs_state_pending_until", table_name="jobs")
    op.drop_index("ix_jobs_pending", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("pending_until")
        batch.drop_column("shape")
