# SPDX-License-Identifier: Apache-2.0
"""The spread ledger: where each turn of a server group claimed hosts, for
the group's next turn, in whichever nova-scheduler, to count.

A member claimed by a turn holds allocations in placement but records no
host until its compute claims it; meanwhile nothing in Nova's databases
says where it is, nor even that it was scheduled (its instance mapping
has no cell until the conductor creates it). Reading every such member's
allocations from placement, at every turn, costs a turn one placement
read per member not yet built: a burst of several hundred members of one
group made each count hundreds of reads. Instead, before it lets go of the
group's lock, a turn writes its claims here (:func:`record`, one row per
member: the group, the member, the host), and the next turn reads them
back with one query (:func:`claims`): a member that records no host and
has no row was claimed by no turn.

The table, ``nova_ext_spread_claims``, is one of nova-ext's own
(``nova-ext-manage db sync``; ``[nova_ext_database] connection``, else the
API database). Rows live from the claim until a later turn of the group
finds the member settled (recording a host, failed, or out of the group)
and deletes them with its own claims. Until ``db sync`` has created the
table, the counts read placement for every member not yet built, as before
the ledger, and the scheduler warns once (``nova-ext-status upgrade check``
says the tables are behind). Every nova-scheduler of a deployment must run
a nova-ext with the ledger: one without it writes no rows.
"""

import contextlib

from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import models
from oslo_log import log as logging
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from nova_ext.quota import db as ext_db

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


class SpreadClaim(ext_db.BASE, models.ModelBase, models.TimestampMixin):
    __tablename__ = 'nova_ext_spread_claims'
    __table_args__ = (
        sa.UniqueConstraint('group_uuid', 'instance_uuid',
                            name='uniq_nova_ext_spread_claims0member'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    group_uuid = sa.Column(sa.String(36), nullable=False)
    instance_uuid = sa.Column(sa.String(36), nullable=False)
    host = sa.Column(sa.String(255), nullable=False)


class Unavailable(Exception):
    """The ledger's table does not exist (``db sync`` has not run)."""


def claims(group_uuid):
    """{member: host} of the group's claims not yet found settled; raises
    Unavailable when the table does not exist.
    """
    with _table(), ext_db.reading(CONF) as session:
        rows = session.query(SpreadClaim.instance_uuid,
                             SpreadClaim.host).filter(
            SpreadClaim.group_uuid == group_uuid).all()
    return dict(rows)


def record(group_uuid, claimed, settled):
    """Write the hosts ``claimed`` ({member: host}) for the group, and
    forget the rows of the ``settled`` members; one transaction. Raises
    Unavailable when the table does not exist.
    """
    gone = set(settled) | set(claimed)
    if not gone:
        return
    with _table(), ext_db.writing(CONF) as session:
        session.query(SpreadClaim).filter(
            SpreadClaim.group_uuid == group_uuid,
            SpreadClaim.instance_uuid.in_(sorted(gone))).delete(
                synchronize_session=False)
        session.add_all([SpreadClaim(group_uuid=group_uuid,
                                     instance_uuid=member, host=host)
                         for member, host in sorted(claimed.items())])


@contextlib.contextmanager
def _table():
    """Raise Unavailable (and warn, once per process) when the ledger's
    table does not exist.
    """
    try:
        yield
    except (db_exc.DBNonExistentTable, sa_exc.DBAPIError) as error:
        if not _no_such_table(error):
            raise
        _warn_missing(error)
        raise Unavailable(str(error))


# MySQL's and MariaDB's ER_NO_SUCH_TABLE: oslo.db raises it as SQLAlchemy
# raised it (exc_filters._raise_mysql_table_doesnt_exist_asis), where it
# turns sqlite's and PostgreSQL's into DBNonExistentTable
MYSQL_NO_SUCH_TABLE = 1146


def _no_such_table(error):
    if isinstance(error, db_exc.DBNonExistentTable):
        return True
    args = getattr(getattr(error, 'orig', None), 'args', ())
    return bool(args) and args[0] == MYSQL_NO_SUCH_TABLE


# whether this process warned that the table is missing: once per process
_warned_missing = False


def _warn_missing(error):
    global _warned_missing
    if not _warned_missing:
        _warned_missing = True
        LOG.warning("nova-ext: the spread ledger's table is missing (%s): "
                    "run 'nova-ext-manage db sync'; until then each count "
                    "of a spread group reads every member not yet built "
                    "from placement", error)
