# SPDX-License-Identifier: Apache-2.0
"""The executor of drains and repairs (nova_ext.maintenance.execute)
against a simulated Nova: moves take a few polls, land where the test says
Nova's scheduler puts them, fail or are refused as the test says; time is
the test's. What is checked is the executor's own behaviour: the budgets,
the barriers, the order, what it reports for each move, re-planning when
Nova picks another kind of host, the safety stop, the timeout and a clean
stop on SIGINT/SIGTERM. The real thing runs against Nova in
tests/functional/test_maintenance.py and tests/system/test_drain.py.
"""

import collections
import contextlib
import io
import os
import signal

import testtools

from nova_ext.maintenance import compute_api
from nova_ext.maintenance import execute
from nova_ext.maintenance import judge
from nova_ext.maintenance import plan
from nova_ext.scheduler import spread_constraints

RACKS = {'r1': ['h1', 'h2'], 'r2': ['h3', 'h4'], 'r3': ['h5', 'h6']}
LAYOUT = judge.Layout({host: {'rack': rack} for rack, hosts in RACKS.items()
                       for host in hosts}, [h for hosts in RACKS.values()
                                            for h in hosts])


class SimulatedNova(object):
    """What the executor asks of Nova's API, answered from memory."""

    def __init__(self, hosts, destinations, ticks=2, refused=(),
                 failing=()):
        self.hosts = dict(hosts)
        self.status = dict.fromkeys(hosts, 'ACTIVE')
        self.task = dict.fromkeys(hosts)
        self.destinations = destinations  # {server: host Nova picks}
        self.ticks = ticks
        self.refused, self.failing = set(refused), set(failing)
        self.moving = {}
        self.records = collections.defaultdict(list)
        self.next_id = 1
        self.started = []
        self.confirmed = []

    def start(self, server, method):
        if server in self.refused:
            raise compute_api.Refused('HTTP 400: No valid host was found.')
        migration = [self.next_id, 'running']
        self.next_id += 1
        self.records[server].append(migration)
        self.moving[server] = [self.ticks, method, migration]
        self.status[server] = 'MIGRATING' if method == 'live' else 'RESIZE'
        self.task[server] = 'migrating'
        self.started.append(server)

    def tick(self):
        for server, entry in list(self.moving.items()):
            entry[0] -= 1
            if entry[0] > 0:
                continue
            del self.moving[server]
            _left, method, migration = entry
            self.task[server] = None
            if server in self.failing:
                self.status[server] = 'ACTIVE'
                migration[1] = 'error'
                continue
            self.hosts[server] = self.destinations[server]
            if method == 'live':
                self.status[server] = 'ACTIVE'
                migration[1] = 'completed'
            else:
                self.status[server] = 'VERIFY_RESIZE'
                migration[1] = 'finished'

    def server(self, server):
        return compute_api.ServerView(self.status[server], self.task[server],
                                      self.hosts[server], None)

    def migrations(self, server, method):
        return [compute_api.MigrationView(number, None, method, status,
                                          None, None)
                for number, status in self.records[server]]

    def confirm(self, server):
        self.status[server] = 'ACTIVE'
        self.records[server][-1][1] = 'confirmed'
        self.confirmed.append(server)

    def failure(self, server, method):
        return 'No valid host was found. rack:max=1 refuses ...'


def group_plan(uuid, text, placement, moves, barriers=()):
    case = plan.Case(uuid, uuid, 'soft-anti-affinity',
                     tuple(spread_constraints.parse(text, ['rack'])),
                     placement)
    baseline = plan.excess(case, LAYOUT, placement)[0]
    return plan.GroupPlan(case, [
        plan.Move(server, uuid, placement[server], (('rack', rack),), '',
                  index in barriers)
        for index, (server, rack) in enumerate(moves)], [], baseline,
        baseline, 0, 0)


class ExecutorTestCase(testtools.TestCase):

    def run_plans(self, nova, plans, methods=None, on_poll=None, **kwargs):
        """Run the executor with ``nova``; ``on_poll(poll number)`` runs
        at every poll. Records how many moves of each group were in flight
        at once.
        """
        self.now = 0.0
        self.polls = 0
        self.most = collections.Counter()
        self.most_overall = 0
        groups = {move.server: p.case.uuid for p in plans for move in p.moves}

        def clock():
            return self.now

        def sleep(seconds):
            self.now += seconds
            self.polls += 1
            in_flight = collections.Counter(groups[s] for s in nova.moving)
            for group, count in in_flight.items():
                self.most[group] = max(self.most[group], count)
            self.most_overall = max(self.most_overall, len(nova.moving))
            nova.tick()
            if on_poll:
                on_poll(self.polls)

        self.out = io.StringIO()
        executor = execute.Executor(
            nova, plans, LAYOUT, methods or {}, {}, out=self.out,
            clock=clock, sleep=sleep, poll_seconds=1.0, **kwargs)
        results = executor.run()
        return executor, {r.server: r for r in results}


class BudgetTest(ExecutorTestCase):

    def plans(self):
        return [group_plan('g1', 'rack:max=3', {'a': 'h1', 'b': 'h1',
                                                'c': 'h2'},
                           [('a', 'r2'), ('b', 'r3'), ('c', 'r2')]),
                group_plan('g2', 'rack:max=3', {'x': 'h1', 'y': 'h2'},
                           [('x', 'r2'), ('y', 'r3')])]

    def nova(self):
        return SimulatedNova(
            {'a': 'h1', 'b': 'h1', 'c': 'h2', 'x': 'h1', 'y': 'h2'},
            {'a': 'h3', 'b': 'h5', 'c': 'h4', 'x': 'h3', 'y': 'h5'})

    def test_one_member_of_a_group_at_a_time(self):
        nova = self.nova()
        _executor, results = self.run_plans(nova, self.plans(), budget=1,
                                            parallel=4)
        self.assertEqual({'g1': 1, 'g2': 1}, dict(self.most))
        self.assertEqual(2, self.most_overall)
        self.assertEqual({execute.MOVED}, {r.outcome
                                           for r in results.values()})
        # a group's moves in the plan's order
        self.assertEqual(['a', 'b', 'c'],
                         [s for s in nova.started if s in 'abc'])
        self.assertEqual('h3', results['a'].destination)

    def test_budget_two_and_parallel(self):
        nova = self.nova()
        self.run_plans(nova, self.plans(), budget=2, parallel=3)
        self.assertEqual({'g1': 2, 'g2': 1}, dict(self.most))
        self.assertEqual(3, self.most_overall)
        nova = self.nova()
        self.run_plans(nova, self.plans(), budget=2, parallel=1)
        self.assertEqual(1, self.most_overall)

    def test_a_barrier_waits_for_the_group(self):
        plans = [group_plan('g1', 'rack:max=3', {'a': 'h1', 'b': 'h1',
                                                 'c': 'h2'},
                            [('a', 'r2'), ('b', 'r3'), ('c', 'r2')],
                            barriers=(2,))]
        nova = self.nova()
        nova.ticks = 3
        self.run_plans(nova, plans, budget=3, parallel=3)
        # a and b together, c only once both are over
        self.assertEqual(2, self.most['g1'])


class OutcomeTest(ExecutorTestCase):

    def test_refused_and_failed_moves_are_named_the_others_go_on(self):
        plans = [group_plan('g1', 'rack:max=3', {'a': 'h1', 'b': 'h1',
                                                 'c': 'h2'},
                            [('a', 'r2'), ('b', 'r3'), ('c', 'r2')])]
        nova = SimulatedNova({'a': 'h1', 'b': 'h1', 'c': 'h2'},
                             {'a': 'h3', 'b': 'h5', 'c': 'h4'},
                             refused={'a'}, failing={'b'})
        replanned = []

        def replan(case, baseline, remaining, tried):
            replanned.append((sorted(remaining), sorted(tried)))
            return None

        _executor, results = self.run_plans(nova, plans, replan=replan)
        self.assertEqual(execute.CANNOT_MOVE, results['a'].outcome)
        self.assertEqual('HTTP 400: No valid host was found.',
                         results['a'].detail)
        self.assertEqual(execute.FAILED, results['b'].outcome)
        self.assertIn('migration 1 error', results['b'].detail)
        self.assertIn('No valid host was found. rack:max=1',
                      results['b'].detail)
        self.assertEqual(execute.MOVED, results['c'].outcome)
        # after each, the group's rest is planned again
        self.assertEqual([(['b', 'c'], ['a']), (['c'], ['a', 'b'])],
                         replanned)

    def test_cold_migrations_are_confirmed(self):
        plans = [group_plan('g1', 'rack:max=3', {'a': 'h1'}, [('a', 'r2')])]
        nova = SimulatedNova({'a': 'h1'}, {'a': 'h3'})
        _executor, results = self.run_plans(nova, plans,
                                            methods={'a': 'cold'})
        self.assertEqual(['a'], nova.confirmed)
        self.assertEqual((execute.MOVED, 'h3', 'cold', 1), (
            results['a'].outcome, results['a'].destination,
            results['a'].method, results['a'].migration))
        self.assertIn('confirmed the cold migration', self.out.getvalue())

    def test_nova_picks_another_rack_the_group_is_planned_again(self):
        plans = [group_plan('g1', 'rack:max=3', {'a': 'h1', 'b': 'h1'},
                            [('a', 'r2'), ('b', 'r2')])]
        # Nova puts a in r3, not r2
        nova = SimulatedNova({'a': 'h1', 'b': 'h1'}, {'a': 'h5', 'b': 'h4'})
        seen = []

        def replan(case, baseline, remaining, tried):
            seen.append(dict(case.placement))
            return plan.GroupPlan(case, [plan.Move(
                'b', 'g1', 'h1', (('rack', 'r2'),), 'again')], [],
                baseline, baseline, 0, 0)

        _executor, results = self.run_plans(nova, plans, replan=replan)
        self.assertEqual([{'a': 'h5', 'b': 'h1'}], seen)
        self.assertEqual(execute.MOVED, results['b'].outcome)
        self.assertIn('planned again', self.out.getvalue())

    def test_a_worse_state_stops_every_new_move(self):
        # rack:max=1: a plan moving a to r2, Nova puts it in r1's other
        # host, next to c (which a plan would never allow)
        plans = [group_plan('g1', 'rack:max=1', {'a': 'h3', 'b': 'h5',
                                                 'c': 'h1'},
                            [('a', 'r2'), ('b', 'r3')])]
        nova = SimulatedNova({'a': 'h3', 'b': 'h5', 'c': 'h1'},
                             {'a': 'h2', 'b': 'h6'})
        executor, results = self.run_plans(nova, plans)
        self.assertIn('further from holding', executor.safety)
        self.assertEqual(execute.NOT_STARTED, results['b'].outcome)
        self.assertEqual(['a'], nova.started)

    def test_a_move_past_the_timeout(self):
        plans = [group_plan('g1', 'rack:max=3', {'a': 'h1', 'b': 'h1'},
                            [('a', 'r2'), ('b', 'r2')])]
        nova = SimulatedNova({'a': 'h1', 'b': 'h1'}, {'a': 'h3', 'b': 'h4'},
                             ticks=100)
        _executor, results = self.run_plans(nova, plans, timeout=5)
        self.assertEqual(execute.TIMED_OUT, results['a'].outcome)
        self.assertEqual('still moving (migration 1 running)',
                         results['a'].detail)
        self.assertEqual(execute.NOT_STARTED, results['b'].outcome)
        self.assertEqual('a move of its group ran past --timeout',
                         results['b'].detail)


class SignalTest(ExecutorTestCase):

    def plans(self):
        return [group_plan('g1', 'rack:max=9', {s: 'h1' for s in 'abcd'},
                           [(s, 'r2') for s in 'abcd'])]

    def nova(self):
        return SimulatedNova({s: 'h1' for s in 'abcd'},
                             {s: 'h3' for s in 'abcd'}, ticks=3)

    def test_sigint_lets_the_moves_in_flight_finish(self):
        nova = self.nova()
        # whatever the runner left there: SIG_IGN under a shell's
        # background job, Python's default_int_handler in a terminal
        handler_before = signal.getsignal(signal.SIGINT)

        def interrupt(poll):
            if poll == 4:  # b is moving
                os.kill(os.getpid(), signal.SIGINT)

        executor, results = self.run_plans(nova, self.plans(),
                                           on_poll=interrupt)
        self.assertEqual(signal.SIGINT, executor.interrupted)
        self.assertEqual(['a', 'b'], nova.started)
        self.assertEqual([execute.MOVED, execute.MOVED, execute.NOT_STARTED,
                          execute.NOT_STARTED],
                         [results[s].outcome for s in 'abcd'])
        self.assertEqual('stopped by SIGINT', results['c'].detail)
        # the handler was given back
        self.assertIs(handler_before, signal.getsignal(signal.SIGINT))

    def test_a_second_signal_stops_waiting_and_reports(self):
        nova = self.nova()

        def interrupt(poll):
            if poll in (4, 5):
                os.kill(os.getpid(), signal.SIGTERM)

        executor, results = self.run_plans(nova, self.plans(),
                                           on_poll=interrupt)
        self.assertEqual(signal.SIGTERM, executor.interrupted)
        self.assertEqual(execute.INTERRUPTED, results['b'].outcome)
        self.assertEqual('still moving (migration 2 running)',
                         results['b'].detail)
        self.assertEqual(2, results['b'].migration)

    def test_wherever_the_signal_lands_it_is_said_once_and_nothing_starts(
            self):
        # the class: a signal may land inside any call to Nova (a start's
        # look at the migrations, a poll, a confirm) or between two; with
        # nothing in flight at that moment the loop ends without reaching
        # its top, where it used to be said (the system drain test's
        # SIGINT right after its first move)
        calls = 0
        for at in range(1, 200):
            nova = SignalAt(self.nova(), at)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                executor, results = self.run_plans(nova, self.plans())
            if not nova.sent:
                calls = at - 1
                break
            said = err.getvalue().count('SIGINT: starting no new move')
            self.assertEqual(1, said, 'signal at call %d: %r' % (
                at, err.getvalue()))
            self.assertEqual(signal.SIGINT, executor.interrupted)
            self.assertEqual([], nova.started_after, 'signal at call %d' % at)
            self.assertEqual(set('abcd'), set(results))
        self.assertGreater(calls, 10)  # every call of a whole run was tried


class SignalAt(object):
    """``nova`` whose ``at``-th call (counting every call) sends SIGINT
    to this process while it is answered.
    """

    def __init__(self, nova, at):
        self.nova, self.at = nova, at
        self.count = 0
        self.sent = False
        self.started_after = []
        self.moving = nova.moving

    def tick(self):
        self.nova.tick()

    def __getattr__(self, name):
        method = getattr(self.nova, name)

        def call(*args):
            self.count += 1
            if self.count == self.at:
                self.sent = True
                os.kill(os.getpid(), signal.SIGINT)
            elif self.sent and name == 'start':
                self.started_after.append(args[0])
            return method(*args)
        return call
