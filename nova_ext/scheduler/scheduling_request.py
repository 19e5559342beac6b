# SPDX-License-Identifier: Apache-2.0
"""One scheduling request as nova-ext's scheduler plugins see it.

Nova hands its plugins one host list at a time (a request pre-filter sees
the RequestSpec before placement is asked; each filter and each weigher,
for each server of a multi-create, sees the hosts left for that server).
What the failure-domain spread needs spans all of them: the group's
members, the request's whole candidate set (so that which domains are
eligible does not depend on the filter's position, or on which server of a
multi-create is being placed), the servers of the request placed so far,
and why no host was left. A :class:`SchedulingRequest` holds exactly that,
for one request, and the one door to the cloud its plugins read through
(:attr:`SchedulingRequest.cloud`, :mod:`nova_ext.scheduler.cloud`).

Life: :func:`opened` builds it where the request is spanned --
nova-scheduler's ``SchedulerManager.select_destinations``, wrapped by
:mod:`nova_ext.scheduler.nova_patches`, and ``nova-ext-manage explain``
and the simulator, which run Nova's scheduling code themselves -- and drops
it when the request ends. Plugins find it with :func:`of`, from the
RequestSpec Nova hands them; they read it, and only the filters record
anything in it (the request's candidates, the reason for no host).
Nothing of it outlives the request.

Where the members come from: in nova-scheduler, a spread request is
scheduled in its group's turn (:mod:`nova_ext.scheduler.group_turns`),
which counted them when it took the group's lock; reading them starts the
request's decision in that turn (:meth:`SchedulingRequest.members`).
Elsewhere, whoever opens the request hands them over (``members``), or
they are what Nova's conductor read of the group.
"""

import collections
import contextlib
import operator
import threading

from oslo_config import cfg
from oslo_log import log as logging

from nova import exception

from nova_ext import cache
from nova_ext.scheduler import failure_domains
from nova_ext.scheduler import fault_reasons
from nova_ext.scheduler import spread_constraints
from nova_ext import upstream

# {RequestSpec: its SchedulingRequest} for the requests being scheduled in
# this process, one entry per request from :func:`opened` to its end (a
# RequestSpec hashes by identity: nova_ext.upstream checks it)
_open = {}
_open_lock = threading.Lock()

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

_NOT_READ = object()
_HOST_NAME = operator.attrgetter('host')


class _Places(object):
    """The :class:`failure_domains.Domains` of one view of the cloud (its
    aggregate objects) for a cloud: {host name: domain} per level, worked
    out as hosts are asked about. Shared by every request that reads the
    same view (:func:`domains_of`), in any thread: its dicts only grow, and
    what they hold never changes for the view. It holds names, never a
    host state: a host nova-scheduler drops is not kept alive here.
    """

    def __init__(self, aggregates, cloud, conf=CONF):
        self.cloud = cloud
        self.domains = failure_domains.Domains(
            aggregates, cloud.failure_domain_traits, conf)

    def serve(self, aggregates, cloud, conf=CONF):
        """Whether these are the domains of the view ``aggregates`` of
        ``cloud``: the same aggregate objects (Nova replaces one's object
        when it is created, changed or deleted), the same cloud, the same
        options, and every failure-domain trait answer read still the
        cloud's current one.
        """
        kept = self.domains.aggregates
        return (len(aggregates) == len(kept)
                and all(map(operator.is_, aggregates, kept))
                and self.cloud.same_as(cloud)
                and self.domains.options == failure_domains.placing_options(
                    conf)
                and all(cloud.failure_domain_traits(level) is answer
                        for level, answer
                        in self.domains.traits_read().items()))


# The failure domains of the cloud's hosts (_Places) as the last request
# that read its view of the aggregates found them, for the next request
# reading the same view: worked out once per view instead of once per
# request (at 10,000 hosts in 500 racks, 1.7 ms a request). One entry,
# replaced by a request that reads another view (an aggregate created,
# changed or deleted), another cloud or other options, or when the
# failure-domain traits it read are read again
# (failure_domain_cache_seconds); {host name: domain} per level, at most
# every host of the view. Forgotten with nova-ext's other caches.
_last_places = None


def _forget_places():
    global _last_places
    _last_places = None


cache.register_reset(_forget_places)


def domains_of(aggregates, cloud):
    """The :class:`failure_domains.Domains` of the view ``aggregates`` of
    ``cloud``: the last request's, if they serve, else new ones, kept for
    the next request.
    """
    global _last_places
    last = _last_places
    if last is not None and last.serve(aggregates, cloud):
        return last.domains
    _last_places = _Places(aggregates, cloud)
    return _last_places.domains


class _Signatures(dict):
    """{host state: (its domain at each of ``levels``)} of one request
    (:meth:`SchedulingRequest.signatures`), a host placed when it is first
    looked up: lives and dies with the request.
    """

    def __init__(self, domains, levels, names):
        super().__init__()
        self.at_levels = [domains.at(level) for level in levels]
        # {host state: its name}, the request's (SchedulingRequest.names)
        self.names = names
        # located(): (the hosts last asked about, their signatures)
        self._located = (None, None)

    def place(self, new, names):
        """Place the hosts ``new`` (a list), named ``names``."""
        self.names.update(zip(new, names))
        columns = [list(map(level.__getitem__, names))
                   for level in self.at_levels]
        if len(columns) == 1:
            # one level: the hosts of a domain share one signature, built
            # once (10,000 hosts, a few hundred domains)
            shared = {domain: (domain,) for domain in set(columns[0])}
            self.update(zip(new, map(shared.__getitem__, columns[0])))
        else:
            self.update(zip(new, zip(*columns)))

    def located(self, host_states):
        """The signatures of ``host_states`` with a domain at every level,
        each once (the hosts of a rack share theirs); worked out again only
        for another list than the last one asked about.
        """
        asked, found = self._located
        if asked is not host_states:
            found = frozenset(
                signature for signature in set(map(self.__getitem__,
                                                   host_states))
                if failure_domains.NO_DOMAIN not in signature)
            self._located = (host_states, found)
        return found

    def __missing__(self, host_state):
        name = self.names[host_state] = host_state.host
        signature = self[host_state] = tuple(
            level[name] for level in self.at_levels)
        return signature


class NotActivated(Exception):
    """A spread request reached nova-ext's plugins outside a request that
    nova-ext spans: nova-ext is not activated in this nova-scheduler.
    """

    REASON = ('nova-ext is not activated in this nova-scheduler, so it '
              'cannot hold the failure-domain spread: add ?plugin=nova_ext '
              'to its [api_database] connection and restart it (nova-ext-'
              'status upgrade check)')


class SchedulingRequest(object):
    """One scheduling request: ``spec_obj``, the RequestSpec Nova schedules;
    ``instance_uuids``, the servers it places (one for a move);
    ``host_manager``, nova-scheduler's (its filters as configured, its view
    of the aggregates); ``cloud``, the :class:`~nova_ext.scheduler.cloud.
    Cloud` its plugins read; ``members``, {host: members of the request's
    group there}, the servers being scheduled left out, as counted by whoever
    opens the request (None: from its turn, or what the conductor read).
    """

    def __init__(self, spec_obj, instance_uuids, host_manager, cloud,
                 members=None):
        self.spec_obj = spec_obj
        self.cloud = cloud
        self.instance_uuids = list(instance_uuids or [])
        self.servers = len(self.instance_uuids) or spec_obj.num_instances
        self.enabled_filters = list(host_manager.enabled_filters)
        # the weighers Nova's handler runs, in order: NovaExtWeighers
        # outranks by the soft promises what every other one can swing
        self.weighers = list(getattr(host_manager, 'weighers', ()))
        self.aggregates = upstream.aggregate_view(host_manager)
        self.group = (spec_obj.instance_group
                      if 'instance_group' in spec_obj else None)
        self.hosts_at_start = len(self.group.hosts or []) if self.group else 0
        self.counted_members = members
        # the group's turn this request is scheduled in
        # (nova_ext.scheduler.group_turns), once it has one
        self.turn = None
        # the hosts the filter judged for the server being placed now, for
        # a claim that must be judged again (see allows), and how many
        # claims the turn refused in the request's last pass
        self.judged_hosts = None
        self.refused_claims = 0
        # the hosts the request's first server could go to, once every
        # filter but nova-ext's passed them (set by the first plugin that
        # sees them; see FailureDomainAntiAffinityFilter)
        self.candidates = None
        # why no host is left: for the NoValidHost (what the server's
        # fault keeps), and whole (what explain shows)
        # why no host is left, asked of the filter that gave it when the
        # request ends with none (see refuse_unless_others_did)
        self._why_no_host = None
        self._why_no_host_in_full = None
        self._ask_why = None
        self._spread = _NOT_READ
        self._domains = None
        # {levels: {host state: its domains at those levels}}
        self._signatures = {}
        # {host state: its name}, of the hosts placed in a failure domain
        self._names = {}
        self._members = None
        # the turn's version the members were read at
        self._members_version = None
        self._hosts_by_provider = None
        self._candidate_set = None

    def spread(self, default_level=None):
        """The request's :class:`failure_domains.Spread`, or None; raises
        InvalidSpreadRequest. Read once (``default_level``: the weigher's
        ``[nova_ext] default_spread_level``, which only it honours).
        """
        if default_level is not None:
            return failure_domains.spread_asked(self.spec_obj, default_level)
        if self._spread is _NOT_READ:
            try:
                self._spread = failure_domains.spread_asked(self.spec_obj)
            except failure_domains.InvalidSpreadRequest as error:
                self._spread = error
        if isinstance(self._spread, Exception):
            raise self._spread
        return self._spread

    def domains(self):
        """Where hosts are (:class:`failure_domains.Domains`), for this
        request.
        """
        if self._domains is None:
            self._domains = domains_of(self.aggregates, self.cloud)
            if self._domains.use_aggregates:
                failure_domains.warn_near_misses(self.aggregates)
        return self._domains

    def signatures(self, levels, host_states):
        """{host state: (its domain at each of ``levels``)} for at least
        ``host_states``, placing any other host the first time it is
        looked up: each host placed once per request and levels, for the
        filter and the weighers alike.
        """
        known = self._signatures.get(levels)
        if known is None:
            known = self._signatures[levels] = _Signatures(
                self.domains(), levels, self._names)
            # the first hosts in bulk, a pass per level looking the names
            # up in C (names read once per request, whatever the levels);
            # the weighers' hosts are then found in the dict (a host Nova
            # hands only them is placed by __missing__)
            new = list(host_states)
            known.place(new, self.names(new))
        return known

    def names(self, host_states):
        """The name of each of ``host_states``, in order: looked up when
        the request placed them in their failure domains (reading a name
        of each of 10,000 host states costs more than looking it up), else
        read.
        """
        if self._names:
            try:
                return list(map(self._names.__getitem__, host_states))
            except KeyError:
                pass
        return list(map(_HOST_NAME, host_states))

    def candidate_set(self):
        """:attr:`candidates` as a set (host states hash by identity)."""
        if self._candidate_set is None:
            self._candidate_set = frozenset(self.candidates)
        return self._candidate_set

    def members(self):
        """{host: members of the group there}, the servers of this request
        not among them.

        In a turn, reading them starts the request's decision: until the
        request reserves the host it claims (or ends), no other request of
        the turn decides, and each decision sees every reservation made
        before it.
        """
        if self.turn is not None:
            timeout = CONF.nova_ext.spread_lock_timeout
            if not self.turn.decide(self, timeout):
                raise exception.NoValidHost(reason=fault_reasons.fitted(
                    'timed out after %ds waiting for the spread lock of '
                    'server group %s: other requests of its turn are still '
                    'deciding' % (timeout, self.turn.group_uuid)))
            if (self._members is None
                    or self._members_version != self.turn.version):
                self._members, self._members_version = self.turn.members(
                    self._not_counted())
            return self._members
        if self._members is not None:
            return self._members
        if self.counted_members is not None:
            members = collections.Counter(self.counted_members)
        elif self.group is None:
            members = collections.Counter()
        else:
            members = failure_domains.members_seen_by_conductor(
                list(self.group.hosts or [])[:self.hosts_at_start],
                set(self.group.members or []) - self._not_counted(),
                self.candidates or ())
        if self.counted_members is not None or self.candidates is not None:
            # final: counted by placement, or corrected with the
            # candidates' instance lists
            self._members = members
        return members

    def allows(self, host_state, version):
        """Whether the request's hard constraints still allow
        ``host_state`` for the server being claimed, the turn's members as
        they are at ``version`` (its reservations since the decision, or
        one given back). Asked by the claim when the turn changed since the
        request read its members: judged again, as the filter judged the
        hosts it was handed.
        """
        if version == self._members_version:
            return True
        spread = self.spread()
        if spread is None or not spread.hard or self.judged_hosts is None:
            return True
        self._members, self._members_version = self.turn.members(
            self._not_counted())
        judgement = failure_domains.Judgement(
            self, spread.hard, self.judged_hosts, together=True)
        return judgement.refusal(host_state) is None

    def host_state_of(self, provider_uuids):
        """The host state of the compute node among ``provider_uuids`` (an
        allocation request's providers), or None.
        """
        if self._hosts_by_provider is None:
            # the first server's hosts: every later one is among them
            states = self.candidates or self.judged_hosts or ()
            self._hosts_by_provider = {state.uuid: state for state in states}
        for uuid in provider_uuids:
            state = self._hosts_by_provider.get(uuid)
            if state is not None:
                return state
        return None

    def hard_levels(self):
        """The levels of the request's hard constraints, in order."""
        try:
            spread = self.spread()
        except failure_domains.InvalidSpreadRequest:
            return ()
        return tuple(c.level for c in spread.hard) if spread else ()

    def broken_by(self, members, placed):
        """The hard constraints ``members`` ({host: members}, the request's
        servers among them, on the hosts ``placed``) break, as text.
        """
        spread = self.spread()
        domains = self.domains()
        eligible_hosts = self.candidates or ()
        broken = []
        for constraint in spread.hard:
            final = failure_domains.per_domain(members, domains,
                                               constraint.level)
            added = {domains.of(host, constraint.level) for host in placed}
            eligible = {domains.of(h.host, constraint.level)
                        for h in eligible_hosts} | set(final) | added
            eligible.discard(failure_domains.NO_DOMAIN)
            if not spread_constraints.holds(constraint, final, eligible,
                                            added):
                broken.append('%s (%s)' % (constraint, ', '.join(
                    '%s %s: %d' % (constraint.level, domain, final[domain])
                    for domain in sorted(added, key=str))))
        return broken

    def alternates_kept_in_domains(self, selections):
        """``selections`` (Nova's: per server, the host chosen and its
        alternates) with each server's alternates kept to hosts in the same
        domain as the chosen host at every hard constraint's level.

        Nova's conductor reschedules a server whose build failed to its
        next alternate by itself, without asking the scheduler (or taking
        the group's lock); an alternate in the chosen host's domains leaves
        every domain's count as the scheduler decided it, whatever other
        requests placed meanwhile.
        """
        levels = self.hard_levels()
        if not levels or not isinstance(selections, list):
            return selections
        domains = self.domains()

        def where(selection):
            return tuple(domains.of(selection.service_host, level)
                         for level in levels)

        kept = []
        for per_server in selections:
            if not isinstance(per_server, list) or len(per_server) < 2:
                kept.append(per_server)
                continue
            chosen = where(per_server[0])
            kept.append([per_server[0]] + [
                alternate for alternate in per_server[1:]
                if where(alternate) == chosen])
        return kept

    def _not_counted(self):
        return set(self.instance_uuids) | {self.spec_obj.instance_uuid}

    def placed(self):
        """The hosts of the servers of this request placed so far, in
        order (Nova appends each to the group's hosts as it consumes it).
        """
        if self.group is None:
            return []
        return list(self.group.hosts or [])[self.hosts_at_start:]

    def remaining(self):
        """How many servers of the request are still to place after the
        one being placed now (0 when Nova looks for alternates, all placed).
        """
        return max(0, self.servers - len(self.placed()) - 1)

    def refuse(self, reason, in_full=None):
        """Make ``reason`` the NoValidHost's, should no host be left
        (fitted to what the server's fault keeps; ``in_full``: the same,
        unabridged).
        """
        self._ask_why = None
        self._why_no_host = fault_reasons.fitted(reason)
        self._why_no_host_in_full = in_full or reason

    def refuse_unless_others_did(self, why):
        """Should no host be left, ``why()`` says why: (reason, in full),
        or None when the reason is not its asker's. Asked once, only then;
        a later call replaces it (None: the asker refused nothing).
        """
        self._ask_why = why

    def _settle(self):
        why, self._ask_why = self._ask_why, None
        answer = why() if why is not None else None
        if answer is not None:
            self.refuse(*answer)

    @property
    def why_no_host(self):
        """Why no host is left, as the server's fault keeps it, or None
        when nova-ext has no reason (the NoValidHost is then Nova's).
        """
        self._settle()
        return self._why_no_host

    @property
    def why_no_host_in_full(self):
        """:attr:`why_no_host`, unabridged."""
        self._settle()
        return self._why_no_host_in_full


# plugins that said nova-ext is not activated in this process: once each
_warned_not_activated = set()


def warn_not_activated(plugin):
    """Log, once per process and plugin, that ``plugin`` met a request
    nova-ext spans none for, and stands aside.
    """
    if plugin not in _warned_not_activated:
        _warned_not_activated.add(plugin)
        LOG.warning("nova-ext: %s stands aside: nova-ext is not activated "
                    "in this nova-scheduler (add ?plugin=nova_ext to its "
                    "[api_database] connection and restart it; nova-ext-"
                    "status upgrade check)", plugin)


@contextlib.contextmanager
def opened(spec_obj, instance_uuids, host_manager, cloud, members=None):
    """The :class:`SchedulingRequest` of ``spec_obj`` for the duration."""
    request = SchedulingRequest(spec_obj, instance_uuids, host_manager,
                                cloud, members)
    with _open_lock:
        if spec_obj in _open:
            raise RuntimeError('RequestSpec %s is already being scheduled'
                               % spec_obj.instance_uuid)
        _open[spec_obj] = request
    try:
        yield request
    finally:
        with _open_lock:
            del _open[spec_obj]


def of(spec_obj):
    """The open :class:`SchedulingRequest` of ``spec_obj``; raises
    NotActivated when nova-ext spans no request for it.
    """
    try:
        return _open[spec_obj]
    except KeyError:
        raise NotActivated(NotActivated.REASON)


def find(spec_obj):
    """The open :class:`SchedulingRequest` of ``spec_obj``, or None."""
    return _open.get(spec_obj)
