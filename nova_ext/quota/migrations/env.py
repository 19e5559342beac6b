# SPDX-License-Identifier: Apache-2.0
"""Alembic environment for nova-ext's tables (``nova-ext-manage db sync``).

The caller hands over an open connection in ``config.attributes``; our
version table is ``nova_ext_alembic_version`` so the tables can share Nova's
API database with Nova's own alembic history.
"""

from alembic import context

from nova_ext.quota import db

connection = context.config.attributes['connection']
context.configure(connection=connection, target_metadata=db.BASE.metadata,
                  version_table=db.VERSION_TABLE, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
