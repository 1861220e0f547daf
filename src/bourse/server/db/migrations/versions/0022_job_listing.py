"""job listing: every page of `GET /jobs` is one index range

Jobs are listed newest first by ``(created_at, id)``, a page after another by that pair
(``before``). An admin's listing (every project) had no index to walk in that order: with a
million jobs each page sorted the whole table (2.7 s on SQLite). ``ix_jobs_created`` is that
order; ``ix_jobs_project_created`` and ``ix_jobs_state_created`` gain ``id`` so a project's
and a state's pages are an exact range too (and the planner, which otherwise walked the whole
table in order to filter a rare state — 290 ms — takes the state's index).

Revision ID: 0022
Revises: 0021
"""

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_created", "jobs", ["created_at", "id"])
    op.drop_index("ix_jobs_project_created", table_name="jobs")
    op.create_index("ix_jobs_project_created", "jobs", ["project_id", "created_at", "id"])
    op.drop_index("ix_jobs_state_created", table_name="jobs")
    op.create_index("ix_jobs_state_created", "jobs", ["state", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_jobs_state_created", table_name="jobs")
    op.create_index("ix_jobs_state_created", "jobs", ["state", "created_at"])
    op.drop_index("ix_jobs_project_created", table_name="jobs")
    op.create_index("ix_jobs_project_created", "jobs", ["project_id", "created_at"])
    op.drop_index("ix_jobs_created", table_name="jobs")
