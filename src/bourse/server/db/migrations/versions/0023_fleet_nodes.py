"""fleet nodes: a price set at enrolment, and draining

``tokens.price``: the $/h of the whole node an enrolment token makes, set by whoever enrolled
it (an SSH fleet's owner, ``bourse fleets add --price-per-hour``); copied to ``nodes.price`` when
the token is spent. Without one a node is priced from its hardware, as before.

``nodes.drained_at``: when the node was drained (``POST /nodes/{id}/drain``): it takes no new
work from then on, whatever its state says; what runs there finishes. A hello does not clear it.

Revision ID: 0023
Revises: 0022
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tokens", sa.Column("price", sa.Float(), nullable=True))
    op.add_column("nodes", sa.Column("drained_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("drained_at")
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("price")
