# SPDX-License-Identifier: Apache-2.0
"""The spread ledger: the hosts each turn of a server group claimed
(nova_ext.scheduler.spread_ledger).

Revision ID: 0002
Revises: 0001
"""

from alembic import op
import sqlalchemy as sa

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'nova_ext_spread_claims',
        sa.Column('created_at', sa.DateTime),
        sa.Column('updated_at', sa.DateTime),
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('group_uuid', sa.String(36), nullable=False),
        sa.Column('instance_uuid', sa.String(36), nullable=False),
        sa.Column('host', sa.String(255), nullable=False),
        sa.UniqueConstraint('group_uuid', 'instance_uuid',
                            name='uniq_nova_ext_spread_claims0member'),
        mysql_engine='InnoDB', mysql_charset='utf8')
