# SPDX-License-Identifier: Apache-2.0
"""The audit and the move plans against the reference model, for clusters,
groups and drifts nobody chose.

Clusters of one or two declared levels plus ``host`` (hosts missing a
level, disabled or in maintenance, ``hosts_without_failure_domain``
either way), a server group with one to three hard and soft constraints,
its members anywhere (drifts: hosts re-racked, members forced onto any
host, hosts put in maintenance, a level's aggregate gone). Judged by
tests/reference/spread_model.py (``standing_state``, ``move_destinations``),
which imports nothing from nova_ext:

* the audit (``audit.report``) says of every constraint what the model
  says: holds or not, and by how many members;
* every move of a drain or a rebalance goes to a class the scheduler would
  accept, and every state the executor may pass through -- any prefix of
  the plan begun, with any of its moves in flight as the budget and the
  barriers allow -- is no further from holding any hard constraint than
  the start;
* whatever destination the scheduler picks among those it accepts, the
  executor's way (plan the rest again when Nova picked another class)
  never passes a worse state either;
* a drain names every server of the drained hosts, moved or blocked; a
  rebalance that blocks nothing ends with every hard constraint held, in
  at least its lower bound of moves.

CI runs the ``ci`` profile at :data:`CI_EXAMPLES` examples a property
(tests/hypothesis_profiles.py); ``NOVA_EXT_HYPOTHESIS_PROFILE=search``
searches longer.
"""

import dataclasses
import itertools

import hypothesis
from hypothesis import strategies as st
import testtools

from nova_ext.maintenance import audit
from nova_ext.maintenance import judge
from nova_ext.maintenance import plan
from nova_ext.scheduler import spread_constraints
from tests import hypothesis_profiles  # noqa: F401 (loads the profile)
from tests.reference import spread_model as model

CI_EXAMPLES = 500
budget = hypothesis.settings(max_examples=max(
    CI_EXAMPLES, hypothesis.settings.default.max_examples))

LEVELS = ('rack', 'row')
DOMAIN_NAMES = ('a', 'b', 'c', 'd')


@st.composite
def clusters(draw):
    levels = draw(st.lists(st.sampled_from(LEVELS), min_size=1,
                           max_size=2, unique=True))
    hosts = []
    for index in range(draw(st.integers(2, 7))):
        domains = {}
        for level in levels:
            if draw(st.integers(0, 7)):  # a level missing now and then
                domains[level] = draw(st.sampled_from(DOMAIN_NAMES))
        hosts.append(model.Host(name='h%d' % index, domains=domains,
                                enabled=draw(st.integers(0, 5)) > 0))
    return levels, model.Cluster(tuple(hosts),
                                 own_domain=draw(st.booleans()))


@st.composite
def constraints(draw, levels):
    chosen, seen = [], set()
    for _ in range(draw(st.integers(1, 3))):
        level = draw(st.sampled_from(tuple(levels) + (model.HOST_LEVEL,)))
        kind = draw(st.sampled_from((model.MAX, model.SKEW)))
        if (level, kind) in seen:
            continue
        seen.add((level, kind))
        min_domains = None
        if kind == model.SKEW and draw(st.integers(0, 3)) == 0:
            min_domains = draw(st.integers(1, 4))
        chosen.append(model.Constraint(
            level, kind, draw(st.integers(1, 2)), min_domains,
            hard=draw(st.integers(0, 3)) > 0))
    return tuple(chosen)


@st.composite
def members(draw, cluster, empty_ok=True):
    names = [host.name for host in cluster.hosts]
    found = {}
    for index in range(draw(st.integers(1, 7))):
        if empty_ok and draw(st.integers(0, 9)) == 0:
            found['m%d' % index] = None  # shelved: on no host
        else:
            found['m%d' % index] = draw(st.sampled_from(names))
    return found


@st.composite
def drifted(draw, cluster, placed):
    """The cluster and members after a few drifts an operator makes."""
    hosts = list(cluster.hosts)
    placed = dict(placed)
    for _ in range(draw(st.integers(0, 3))):
        what = draw(st.sampled_from(('re-rack', 'force', 'maintenance',
                                     'aggregate gone')))
        index = draw(st.integers(0, len(hosts) - 1))
        host = hosts[index]
        if what == 're-rack' and host.domains:
            level = draw(st.sampled_from(sorted(host.domains)))
            domains = dict(host.domains)
            domains[level] = draw(st.sampled_from(DOMAIN_NAMES))
            hosts[index] = dataclasses.replace(host, domains=domains)
        elif what == 'aggregate gone' and host.domains:
            domains = dict(host.domains)
            domains.pop(draw(st.sampled_from(sorted(domains))))
            hosts[index] = dataclasses.replace(host, domains=domains)
        elif what == 'maintenance':
            hosts[index] = dataclasses.replace(host, enabled=False)
        elif what == 'force' and placed:
            member = draw(st.sampled_from(sorted(placed)))
            placed[member] = host.name
    return dataclasses.replace(cluster, hosts=tuple(hosts)), placed


@st.composite
def drifted_groups(draw):
    """(levels, cluster, constraints, {member: host}) after drifts."""
    levels, cluster = draw(clusters())
    group_constraints = draw(constraints(levels))
    cluster, placed = draw(drifted(cluster, draw(members(cluster))))
    return levels, cluster, group_constraints, placed


def ext_constraints(constraints):
    return tuple(spread_constraints.Constraint(
        c.level, c.kind, c.value, c.min_domains, c.hard)
        for c in constraints)


def layout_of(cluster, levels):
    """The cluster as nova-ext's adapter hands it over: a host without a
    domain is its own one with ``hosts_without_failure_domain = host``.
    """
    domains = {}
    for host in cluster.hosts:
        domains[host.name] = {
            level: cluster.domain(host.name, level) for level in levels}
    return judge.Layout(domains, [h.name for h in model.usable_hosts(
        cluster)])


def case_of(cluster_constraints, placed):
    return plan.Case('g', 'g', 'soft-anti-affinity',
                     ext_constraints(cluster_constraints), dict(placed))


def disabled(cluster, names):
    return dataclasses.replace(cluster, hosts=tuple(
        dataclasses.replace(host, enabled=False) if host.name in names
        else host for host in cluster.hosts))


def reachable(moves, group_budget):
    """Every set of finished moves (indices) the executor may pass
    through: moves start in order, at most ``group_budget`` in flight, a
    barrier only once every earlier move finished.
    """
    states = {frozenset()}
    for started in range(1, len(moves) + 1):
        for size in range(0, min(group_budget, started) + 1):
            for moving in itertools.combinations(range(started), size):
                ok = True
                for later in range(started):
                    earlier = [i for i in moving if i < later]
                    if len(earlier) > group_budget - 1 or (
                            moves[later].barrier and earlier):
                        ok = False
                        break
                if ok:
                    states.add(frozenset(range(started)) - set(moving))
    return states


class AuditAgainstModelTest(testtools.TestCase):

    @budget
    @hypothesis.given(st.data())
    def test_audit_says_what_the_model_says(self, data):
        levels, cluster, group_constraints, placed = data.draw(
            drifted_groups())
        expected = [(str(ext), holds, excess) for ext, (_c, holds, excess)
                    in zip(ext_constraints(group_constraints),
                           model.standing_state(cluster, placed,
                                                group_constraints))]
        state = audit.CloudState(
            layout_of(cluster, levels), {}, [audit.GroupState(
                'g', 'g', 'p', 'soft-anti-affinity', 1,
                tuple(audit.Member(uuid, uuid, host, 'ACTIVE', None, 'p')
                      for uuid, host in sorted(placed.items())),
                ext_constraints(group_constraints), {})], tuple(levels))
        [group] = audit.report(state)['groups']
        self.assertEqual(expected, [
            (entry['constraint'], entry['holds'], entry['excess'])
            for entry in group['constraints']])


class PlansAgainstModelTest(testtools.TestCase):

    def plan_for(self, data, cluster, levels, group_constraints, placed):
        """(plan, the cluster the moves happen in, drained hosts,
        group budget).
        """
        group_budget = data.draw(st.integers(1, 3), label='budget')
        case = case_of(group_constraints, placed)
        if data.draw(st.booleans(), label='drain'):
            names = [host.name for host in cluster.hosts]
            drained = set(data.draw(st.lists(st.sampled_from(names),
                                             min_size=1, max_size=3),
                                    label='drained'))
            cluster = disabled(cluster, drained)
            leaving = {m for m, h in placed.items() if h in drained}
            found = plan.drain(case, layout_of(cluster, levels), leaving,
                               budget=group_budget)
            moved_or_blocked = sorted(
                [m.server for m in found.moves] +
                [b.server for b in found.blocked])
            self.assertEqual(sorted(leaving), moved_or_blocked)
            return found, cluster, drained, group_budget
        return (plan.rebalance(case, layout_of(cluster, levels),
                               budget=group_budget),
                cluster, set(), group_budget)

    @budget
    @hypothesis.given(st.data())
    def test_no_state_the_executor_passes_is_worse(self, data):
        levels, cluster, group_constraints, placed = data.draw(
            drifted_groups())
        found, cluster, drained, group_budget = self.plan_for(
            data, cluster, levels, group_constraints, placed)
        self.assertNoWorseState(
            found, cluster, levels, group_constraints, placed, group_budget,
            lambda hosts: data.draw(st.sampled_from(hosts), label='host'),
            drained)

    def assertNoWorseState(self, found, cluster, levels, group_constraints,
                           placed, group_budget, choose, drained):
        layout = layout_of(cluster, levels)
        start = model.hard_excess(cluster, placed, group_constraints)
        self.assertEqual(start, list(found.baseline))
        # each move to a host of the class the plan predicts, which the
        # scheduler must accept
        chosen, state = [], dict(placed)
        for move in found.moves:
            accepted = model.move_destinations(cluster, group_constraints,
                                               state, move.server)
            predicted = tuple(domain for _level, domain in move.destination)
            hosts = [host for host in accepted if layout.signature(
                host, found.case.levels) == predicted]
            self.assertTrue(hosts, (move, accepted))
            host = choose(hosts)
            chosen.append(host)
            state[move.server] = host
        for done in reachable(found.moves, group_budget):
            now = dict(placed)
            for index in done:
                now[found.moves[index].server] = chosen[index]
            excess = model.hard_excess(cluster, now, group_constraints)
            self.assertTrue(all(a <= b for a, b in zip(excess, start)),
                            (sorted(done), excess, start))
        final = model.hard_excess(cluster, state, group_constraints)
        self.assertEqual(list(found.final), final)
        if not drained and not found.blocked:
            self.assertEqual([0] * len(final), final)
            self.assertLessEqual(found.lower_bound, len(found.moves))

    def test_found_by_search_moves_in_flight_together(self):
        # A drain of three hosts, rack:skew=2,min_domains=2, two members
        # leaving, two of them in flight at once: if m3 (to rack b)
        # finished while m0 (to rack c) was still moving, rack b would
        # hold 3 with rack c still empty. The plan makes m3 wait.
        cluster = model.Cluster(tuple(model.Host(name, {'rack': rack},
                                                 enabled=enabled)
                                      for name, rack, enabled in (
            ('h0', 'c', True), ('h1', 'b', False), ('h2', 'b', True),
            ('h3', 'd', True), ('h4', 'a', False), ('h5', 'b', True),
            ('h6', 'c', False))))
        group_constraints = (model.Constraint('rack', model.SKEW, 2, 2),)
        placed = {'m0': 'h1', 'm1': 'h3', 'm2': 'h2', 'm3': 'h4',
                  'm4': 'h3'}
        found = plan.drain(case_of(group_constraints, placed),
                           layout_of(cluster, ['rack']), {'m0', 'm3'},
                           budget=2)
        self.assertEqual([False, True], [m.barrier for m in found.moves])
        self.assertNoWorseState(found, cluster, ['rack'],
                                group_constraints, placed, 2,
                                lambda hosts: hosts[0], {'h1', 'h4', 'h6'})

    @budget
    @hypothesis.given(st.data())
    def test_whatever_nova_picks_no_state_is_worse(self, data):
        levels, cluster, group_constraints, placed = data.draw(
            drifted_groups())
        found, cluster, drained, group_budget = self.plan_for(
            data, cluster, levels, group_constraints, placed)
        layout = layout_of(cluster, levels)
        start = model.hard_excess(cluster, placed, group_constraints)
        state, tried = dict(placed), set()
        queue = list(found.moves)
        for _ in range(3 * len(placed) + 3):
            if not queue:
                break
            move = queue.pop(0)
            accepted = model.move_destinations(cluster, group_constraints,
                                               state, move.server)
            self.assertTrue(accepted, move)
            host = data.draw(st.sampled_from(sorted(accepted)),
                             label='Nova picks')
            state[move.server] = host
            tried.add(move.server)
            excess = model.hard_excess(cluster, state, group_constraints)
            self.assertTrue(all(a <= b for a, b in zip(excess, start)),
                            (move, host, excess, start))
            predicted = tuple(domain for _level, domain in move.destination)
            if layout.signature(host, found.case.levels) != predicted:
                # the executor plans the rest again from here
                case = case_of(group_constraints, state)
                if drained:
                    remaining = {m.server for m in queue}
                    queue = plan.drain(case, layout, remaining,
                                       baseline=start).moves
                else:
                    queue = plan.rebalance(
                        case, layout, dict.fromkeys(tried, 'tried'),
                        group_budget, start).moves
