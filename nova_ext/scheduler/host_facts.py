# SPDX-License-Identifier: Apache-2.0
"""What nova-ext reads of a request's hosts, read once per request.

nova-scheduler hands FailureDomainAntiAffinityFilter every candidate, then
NovaExtWeighers the hosts that passed, for the same RequestSpec object. Both
read each host's name (the group's members are found by name; the image
cache is known by host name) and its aggregates (which failure domain;
whether one overrides a weigher's multiplier). At 10,000 candidates each
read of one attribute of every host costs 3-5 ms, so each is read once per
request and thread here, and looked up by host state afterwards (Nova's
HostState hashes by identity: :mod:`nova_ext.upstream` checks it).

Facts are kept for the request being scheduled in this thread only: the next
request (another RequestSpec object) reads again, so a host's current
aggregates are always the ones used. When NovaExtWeighers has weighed the
request, :func:`release` drops them, and what other modules keep per request
(:func:`register_release`): a thread idle after weighing 10,000 hosts would
otherwise hold a few MB of them, and keep a removed compute's host state
alive, until its next request.
"""

import itertools
import operator
import threading

from nova_ext import cache

_HOST_NAME = operator.attrgetter('host')
_AGGREGATES = operator.attrgetter('aggregates')


class PerHost(dict):
    """{host state: its value} for the hosts of one request, read by
    ``read_all(host_states)`` (an iterable of their values, in order): the
    filters read the candidates, the weighers look up those that passed.

    The values of the last list of hosts read are also kept in its order,
    and :meth:`narrow` keeps them in step with a filter dropping hosts: the
    weighers, handed the hosts the filters kept in the same order, get
    them by position (one comparison of the two lists, which Python makes
    by identity, in C) instead of a lookup per host. The dict by host state
    is built only when other hosts are asked: at 10,000 candidates building
    it costs 1-3 ms per fact.
    """

    def __init__(self, read_all):
        super().__init__()
        self.read_all = read_all
        # the last hosts read (a list of our own) and their values, until
        # they are copied into the dict
        self._hosts = []
        self._values = []

    def __missing__(self, host_state):
        self._index()
        if host_state in self:
            return self[host_state]
        value, = self.read_all([host_state])
        self[host_state] = value
        return value

    def _index(self):
        """Copy the hosts kept in order into the dict."""
        if self._hosts:
            self.update(zip(self._hosts, self._values))
            self._hosts, self._values = [], []

    def of(self, host_states):
        """[the value of each of ``host_states``]: the values kept in order
        when these are the same hosts in the same order; looked up when as
        many hosts were read already (a host not among them is read alone);
        else read together.
        """
        if not isinstance(host_states, list):
            host_states = list(host_states)
        # HostState compares by identity (nova_ext.upstream checks it)
        if host_states and host_states == self._hosts:
            return list(self._values)
        self._index()
        if len(self) >= len(host_states):
            return list(map(self.__getitem__, host_states))
        values = list(self.read_all(host_states))
        self._hosts, self._values = list(host_states), values
        return list(values)

    def holds(self, host_states):
        """Whether :meth:`of` would look ``host_states`` up rather than
        read them together (``host_states``: a list).
        """
        return bool(host_states) and host_states == self._hosts or (
            len(self) + len(self._hosts) >= len(host_states))

    def narrow(self, host_states, kept, kept_hosts=None):
        """``host_states`` became the hosts of it that ``kept`` (a truth
        value per host, in order) says: a filter dropped the others. Values
        kept in the order of ``host_states`` follow. ``kept_hosts``, those
        hosts already picked out, is shared, never changed.
        """
        if host_states and host_states == self._hosts:
            if kept_hosts is None:
                kept_hosts = list(itertools.compress(self._hosts, kept))
            self._hosts = kept_hosts
            self._values = list(itertools.compress(self._values, kept))


def _read_names(host_states):
    return map(_HOST_NAME, host_states)


def read_aggregate_sets(host_states):
    """The aggregate sets of ``host_states``, read now and not kept (an
    iterator), for a caller outside a request.
    """
    # no Python bytecode per host
    return map(tuple, map(_AGGREGATES, host_states))


def each_aggregate(aggregate_sets):
    """Each aggregate object of ``aggregate_sets`` once, in the order they
    name them (a dict's keys): the few hundred sets the hosts share are
    walked, not every host's (Nova's objects hash by identity).
    """
    return dict.fromkeys(itertools.chain.from_iterable(
        dict.fromkeys(aggregate_sets)))


class _Request(threading.local):
    # the request itself is kept, so that its id is not reused meanwhile
    spec_obj = None
    names = None
    aggregate_sets = None

    def facts(self, spec_obj):
        if self.spec_obj is not spec_obj:
            self.spec_obj = spec_obj
            self.names = PerHost(_read_names)
            self.aggregate_sets = PerHost(read_aggregate_sets)
        return self

    def clear(self):
        self.spec_obj = self.names = self.aggregate_sets = None

    def release(self, spec_obj):
        if self.spec_obj is spec_obj:
            self.clear()


_request = _Request()
cache.register_reset(_request.clear)
_releases = [_request.release]


def register_release(release):
    """Have :func:`release` call ``release(spec_obj)`` too: a per-thread
    memo of another module, which should forget ``spec_obj``'s hosts.
    """
    _releases.append(release)


def release(spec_obj):
    """Forget what this thread keeps of ``spec_obj``'s hosts: its weighing
    is over. A later call for the same request reads the hosts again.
    """
    for forget in _releases:
        forget(spec_obj)


def narrow(spec_obj, host_states, kept, kept_hosts):
    """A filter kept of ``host_states`` (this request's candidates, as
    asked before) those ``kept`` says (a truth value per host, in order),
    ``kept_hosts``: see :meth:`PerHost.narrow`.
    """
    facts = _request
    if facts.spec_obj is spec_obj:
        facts.names.narrow(host_states, kept, kept_hosts)
        facts.aggregate_sets.narrow(host_states, kept, kept_hosts)


def names(spec_obj, host_states):
    """[the name (``host``) of each of ``host_states``]."""
    return _request.facts(spec_obj).names.of(host_states)


def aggregates_of(spec_obj, host_states):
    """Each aggregate object of ``host_states`` (a list) once, in a dict's
    keys: from the sets a filter read for request ``spec_obj``, else read
    now and not kept. Building a tuple per host only to find the few
    hundred aggregates they share costs 0.1 ms per 1,000 hosts.
    """
    sets = _request.facts(spec_obj).aggregate_sets
    if sets.holds(host_states):
        return each_aggregate(sets.of(host_states))
    return dict.fromkeys(itertools.chain.from_iterable(
        map(_AGGREGATES, host_states)))


def aggregate_sets(spec_obj, host_states):
    """[a tuple of the aggregate objects of each of ``host_states``]: the
    hosts of a rack share one (nova-scheduler's HostManager shares one
    object per aggregate between its hosts).
    """
    return _request.facts(spec_obj).aggregate_sets.of(host_states)
