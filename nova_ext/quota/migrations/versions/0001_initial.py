# SPDX-License-Identifier: Apache-2.0
"""Per-flavor quota limits and process activations.

Revision ID: 0001
Revises:
"""

from alembic import op
import sqlalchemy as sa

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'nova_ext_flavor_quotas',
        sa.Column('created_at', sa.DateTime),
        sa.Column('updated_at', sa.DateTime),
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('project_id', sa.String(255), nullable=False),
        sa.Column('scope', sa.String(16), nullable=False),
        sa.Column('name', sa.String(255), nullable=False),
        sa.Column('resource', sa.String(16), nullable=False),
        sa.Column('hard_limit', sa.Integer, nullable=False),
        sa.UniqueConstraint('project_id', 'scope', 'name', 'resource',
                            name='uniq_nova_ext_flavor_quotas0limit'),
        mysql_engine='InnoDB', mysql_charset='utf8')
    op.create_index('nova_ext_flavor_quotas_scope_name_idx',
                    'nova_ext_flavor_quotas', ['scope', 'name'])
    op.create_table(
        'nova_ext_activations',
        sa.Column('created_at', sa.DateTime),
        sa.Column('updated_at', sa.DateTime),
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('host', sa.String(255), nullable=False),
        sa.Column('binary', sa.String(255), nullable=False),
        sa.Column('pid', sa.Integer, nullable=False),
        sa.Column('quota_driver', sa.String(255), nullable=True),
        sa.UniqueConstraint('host', 'binary',
                            name='uniq_nova_ext_activations0host0binary'),
        mysql_engine='InnoDB', mysql_charset='utf8')
