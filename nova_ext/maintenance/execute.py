# SPDX-License-Identifier: Apache-2.0
"""Running a plan's moves through Nova's API: ``host drain`` and ``spread
rebalance --execute``.

Budgets: at most ``--parallel`` moves at once, at most
``--max-unavailable-per-group`` members of one server group moving at once
(Kubernetes' PodDisruptionBudget ``maxUnavailable``), a group's moves in
the plan's order, a move marked ``barrier`` only once every earlier move of
its group has finished. Each move is followed through the server and its
migration record until it is over; a cold migration is confirmed when it
waits in VERIFY_RESIZE. ``--timeout``: a move still running after that many
seconds is reported with its migration id and state; its group starts no
more moves in this run and it keeps its place under ``--parallel``.

After each move the group is judged where its members now are: Nova's
scheduler may have picked another kind of host than the plan expected, or
the move failed; the group's remaining moves are then planned again from
there (once its moves in flight are over). A state further from holding
than the start, which the plan rules out, would stop every new move.

SIGINT or SIGTERM: no new move starts; the moves in flight are followed to
their end (or their timeout); a second signal stops waiting and reports
them (server, migration id and state). Nothing is kept on disk: run again,
the command reads the cloud afresh and goes on.
"""

import collections
import signal
import sys
import time
import typing as ty

from nova_ext import errors
from nova_ext.maintenance import compute_api
from nova_ext.maintenance import judge
from nova_ext.maintenance import plan

MOVED = 'moved'
FAILED = 'failed'
TIMED_OUT = 'timed out'
INTERRUPTED = 'interrupted'
CANNOT_MOVE = 'cannot move'
NOT_STARTED = 'not started'
SUMMARY_SECONDS = 30


class Result(ty.NamedTuple):
    server: str
    name: str
    group: ty.Optional[str]
    source: ty.Optional[str]
    destination: ty.Optional[str]
    method: ty.Optional[str]
    migration: ty.Any
    outcome: str
    detail: str = ''


class _Track(object):
    """One group (or one server in no group) as it is being moved."""

    def __init__(self, group_plan):
        self.case = group_plan.case
        self.placement = dict(group_plan.case.placement)
        self.baseline = group_plan.baseline
        self.queue = list(group_plan.moves)
        self.running = 0
        self.started = 0
        self.replan = False
        self.held = None  # why this group starts no more moves

    @property
    def budgeted(self):
        return self.case.uuid is not None


class _Running(object):
    def __init__(self, move, track, method, clock, known):
        self.move, self.track, self.method = move, track, method
        self.started = clock()
        self.known = known  # migration ids of the server before this move
        self.migration = None
        self.confirmed = False
        self.lingering = False


class Executor(object):
    """Runs ``group_plans`` (:class:`plan.GroupPlan`) with ``api``
    (:class:`compute_api.ComputeAPI`).

    ``methods``: {server: LIVE or COLD}; ``names``: {server: its name};
    ``replan(case, baseline, remaining, tried)``: the rest of a group's
    plan from where its members now are (a :class:`plan.GroupPlan`) for
    the servers of ``remaining`` still to move, none of ``tried`` (moved or
    failed already) moved again; None keeps the plan.
    """

    def __init__(self, api, group_plans, layout, methods, names, budget=1,
                 parallel=1, timeout=600, out=None, replan=None,
                 poll_seconds=2.0, clock=time.monotonic, sleep=time.sleep):
        self.api = api
        self.tracks = [_Track(group_plan) for group_plan in group_plans]
        self.layout = layout
        self.methods = methods
        self.names = names
        self.budget = max(1, budget)
        self.parallel = max(1, parallel)
        self.timeout = timeout
        self.out = out or sys.stdout
        self.replan_group = replan
        self.poll_seconds = poll_seconds
        self.clock = clock
        self.sleep = sleep
        self.running = []
        self.results = []
        self.signals = []
        self.safety = None
        self._announced = False
        self._begun = clock()
        self._summary_at = self._begun + SUMMARY_SECONDS

    def adopt(self, server, method, source, migration=None):
        """Follow a move an earlier run started (``migration``: its
        record's id) as if this run had: confirmed if it waits in
        VERIFY_RESIZE, reported like the others.
        """
        case = plan.Case(None, '', None, (), {server: source})
        track = _Track(plan.GroupPlan(case, [], [], (), (), 0, 0))
        self.tracks.append(track)
        known = {m.id for m in self.api.migrations(server, method)}
        known.discard(migration)
        run = _Running(plan.Move(server, None, source, (),
                                 'started by an earlier run'),
                       track, method, self.clock, known)
        track.running += 1
        self.running.append(run)
        self.say('%s: %s migration from %s under way since an earlier run: '
                 'following it' % (self._name(server), method, source))

    # -- output ----------------------------------------------------------

    def say(self, text):
        elapsed = int(self.clock() - self._begun)
        print('[%02d:%02d] %s' % (elapsed // 60, elapsed % 60, text),
              file=self.out, flush=True)

    def _name(self, server):
        return self.names.get(server, server)

    def _group_name(self, track):
        return track.case.name if track.case.uuid else None

    def _result(self, run_or_move, track, outcome, detail='', dest=None,
                method=None, migration=None):
        move = getattr(run_or_move, 'move', run_or_move)
        self.results.append(Result(
            move.server, self._name(move.server), self._group_name(track),
            move.source, dest, method or self.methods.get(move.server),
            migration, outcome, detail))

    # -- signals ---------------------------------------------------------

    def _on_signal(self, signum, frame):
        # only noted here: the loop says it, between two API calls
        self.signals.append(signum)

    def _announce(self):
        if self.signals and not self._announced:
            self._announced = True
            print('nova-ext-manage: %s: starting no new move; waiting for '
                  'the %d in flight (again to stop waiting)' % (
                      signal.Signals(self.signals[0]).name,
                      len(self.running)), file=sys.stderr, flush=True)

    def _install(self):
        previous = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[signum] = signal.signal(signum, self._on_signal)
            except ValueError:
                pass  # not the main thread (a test): no handler
        return previous

    @property
    def stopping(self):
        return bool(self.signals) or self.safety is not None

    @property
    def interrupted(self):
        """The first signal received, or None."""
        return self.signals[0] if self.signals else None

    # -- the loop --------------------------------------------------------

    def run(self):
        """Every move run (or left); returns the results, in order."""
        previous = self._install()
        try:
            self._loop()
            # a signal taken while nothing was in flight (during a re-plan
            # or a start's call to Nova) ends the loop before its top
            self._announce()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        self._finish()
        return self.results

    def _loop(self):
        while len(self.signals) < 2:
            self._announce()
            self._replan_settled()
            if not self.stopping:
                self._start_what_fits()
            active = [run for run in self.running if not run.lingering]
            if not active and (self.stopping or not self._startable()):
                break
            self.sleep(self.poll_seconds)
            for run in list(self.running):
                if len(self.signals) < 2:
                    self._follow_one(run)
            if self.clock() >= self._summary_at:
                self._summary()

    def _startable(self):
        """Whether some move may still start (now, or once its group is
        planned again).
        """
        return any(self._next_of(track) is not None or (
            track.replan and track.queue and not track.held)
            for track in self.tracks)

    def _next_of(self, track):
        if not track.queue or track.held or track.replan:
            return None
        move = track.queue[0]
        if track.budgeted:
            if track.running >= self.budget:
                return None
            if move.barrier and track.running:
                return None
        return move

    def _start_what_fits(self):
        progressed = True
        while progressed and len(self.running) < self.parallel:
            progressed = False
            for track in self.tracks:
                if len(self.running) >= self.parallel or self.stopping:
                    break
                move = self._next_of(track)
                if move is None:
                    continue
                track.queue.pop(0)
                self._start(move, track)
                progressed = True

    def _start(self, move, track):
        method = self.methods.get(move.server, compute_api.LIVE)
        name = self._name(move.server)
        try:
            known = {m.id for m in self.api.migrations(move.server, method)}
            if self.stopping:
                # a signal came while Nova was asked: this one stays
                track.queue.insert(0, move)
                return
            self.api.start(move.server, method)
        except Exception as error:  # noqa: one move fails, not the run
            refused = isinstance(error, compute_api.Refused)
            self.say('%s: %s the %s migration: %s' % (
                name, 'Nova refused' if refused else 'could not start',
                method, errors.one_line(error)))
            self._result(move, track, CANNOT_MOVE if refused else FAILED,
                         errors.one_line(error), method=method)
            track.replan = track.budgeted
            return
        run = _Running(move, track, method, self.clock, known)
        track.running += 1
        track.started += 1
        self.running.append(run)
        self.say('%s%s: %s migration from %s started (expected to: %s)' % (
            name, ' (group %s)' % track.case.name if track.budgeted else '',
            method, move.source, plan.describe_class(
                track.case.levels, [d for _l, d in move.destination])))

    def _follow_one(self, run):
        """Follow ``run``; a failing API call costs this poll of this
        move, not the run (its --timeout still counts).
        """
        try:
            self._follow(run)
        except Exception as error:  # noqa: one move's trouble, not the tool's
            if not run.lingering and \
                    self.clock() - run.started > self.timeout:
                run.lingering = True
                run.track.held = 'a move of its group ran past --timeout'
            self.say('%s: could not read its state (%s); asking again' % (
                self._name(run.move.server), errors.one_line(error)))

    def _migration(self, run):
        found = [m for m in self.api.migrations(run.move.server, run.method)
                 if m.id not in run.known]
        return found[-1] if found else run.migration

    def _follow(self, run):
        server = run.move.server
        name = self._name(server)
        view = self.api.server(server)
        if view is None:
            return self._over(run, FAILED, 'the server was deleted')
        run.migration = self._migration(run)
        migration = run.migration
        if run.method == compute_api.COLD and view.status == 'VERIFY_RESIZE' \
                and not run.confirmed:
            try:
                self.api.confirm(server)
            except compute_api.Refused as error:
                return self._over(run, FAILED, 'confirming the cold '
                                  'migration: %s' % error)
            run.confirmed = True
            self.say('%s: confirmed the cold migration to %s' % (
                name, view.host))
            return
        settled = view.task_state is None and view.status not in (
            'MIGRATING', 'RESIZE', 'VERIFY_RESIZE')
        if settled and (migration is None or migration.over
                        or view.host != run.move.source):
            if view.host != run.move.source and view.status != 'ERROR':
                return self._over(run, MOVED, dest=view.host)
            why = self.api.failure(server, run.method) or view.fault
            state = ('migration %s %s' % (migration.id, migration.status)
                     if migration else 'no migration record')
            return self._over(run, FAILED, '%s; status %s%s' % (
                state, view.status, ': %s' % why if why else ''))
        if view.status == 'ERROR':
            return self._over(run, FAILED, 'status ERROR: %s' % (
                view.fault or 'no fault recorded'))
        if not run.lingering and self.clock() - run.started > self.timeout:
            run.lingering = True
            run.track.held = 'a move of its group ran past --timeout'
            self.say('%s: still moving after %ds (%s); its group starts no '
                     'more moves' % (name, self.timeout,
                                     self._describe(run)))

    def _describe(self, run):
        if run.migration is None:
            return 'no migration record yet'
        return 'migration %s %s' % (run.migration.id, run.migration.status)

    def _over(self, run, outcome, detail='', dest=None):
        track = run.track
        self.running.remove(run)
        track.running -= 1
        move = run.move
        migration = run.migration.id if run.migration else None
        name = self._name(move.server)
        if outcome == MOVED:
            took = int(self.clock() - run.started)
            where = plan.describe_class(track.case.levels, self.layout
                                        .signature(dest, track.case.levels))
            self.say('%s: moved %s -> %s (%s) in %ds, migration %s' % (
                name, move.source, dest, where, took, migration))
            if run.lingering:
                detail = 'after the --timeout of %ds' % self.timeout
            self._landed(run, dest)
        else:
            self.say('%s: %s: %s' % (name, outcome, detail))
            if track.budgeted:
                track.replan = True
        self._result(run, track, outcome, detail, dest=dest,
                     method=run.method, migration=migration)

    def _landed(self, run, dest):
        track = run.track
        move = run.move
        if move.server in track.placement:
            track.placement[move.server] = dest
        if not track.budgeted:
            return
        levels = track.case.levels
        expected = tuple(domain for _level, domain in move.destination)
        if levels and self.layout.signature(dest, levels) != expected:
            track.replan = True
        hard, _soft = plan.excess(track.case, self.layout, track.placement)
        if not judge.no_worse(hard, track.baseline):
            self.safety = (
                'group %s is further from holding its hard constraints than '
                'at the start (excess %s, was %s) after %s moved to %s; no '
                'new move starts' % (track.case.name, list(hard),
                                     list(track.baseline),
                                     self._name(move.server), dest))
            self.say('STOP: ' + self.safety)

    def _replan_settled(self):
        for track in self.tracks:
            if not track.replan or track.running or self.stopping:
                continue
            track.replan = False
            if self.replan_group is None or not track.queue:
                continue
            case = track.case._replace(placement=dict(track.placement))
            remaining = {move.server for move in track.queue}
            tried = {result.server for result in self.results}
            fresh = self.replan_group(case, track.baseline, remaining, tried)
            if fresh is None:
                continue
            track.queue = list(fresh.moves)
            for item in fresh.blocked:
                if item.server in remaining:
                    self._result(plan.Move(item.server, case.uuid, item.host,
                                           (), ''), track, CANNOT_MOVE,
                                 item.reason)
            self.say('group %s: planned again from where its members are '
                     'now: %d move%s left' % (
                         case.name, len(track.queue),
                         '' if len(track.queue) == 1 else 's'))

    def _summary(self):
        self._summary_at = self.clock() + SUMMARY_SECONDS
        queued = sum(len(track.queue) for track in self.tracks)
        done = collections.Counter(result.outcome for result in self.results)
        self.say('%d moving (%s), %d moved, %d to go%s' % (
            len(self.running), ', '.join(self._name(run.move.server)
                                         for run in self.running) or '-',
            done[MOVED], queued, ''.join(
                ', %d %s' % (count, outcome) for outcome, count
                in sorted(done.items()) if outcome != MOVED)))

    def _finish(self):
        for run in list(self.running):
            detail = 'still moving (%s)' % self._describe(run)
            outcome = TIMED_OUT if run.lingering else INTERRUPTED
            self._result(run, run.track, outcome, detail, method=run.method,
                         migration=run.migration.id if run.migration
                         else None)
        for track in self.tracks:
            why = ('stopped by %s' % signal.Signals(self.interrupted).name
                   if self.interrupted else self.safety or track.held
                   or 'stopped')
            for move in track.queue:
                self._result(move, track, NOT_STARTED, why)
            track.queue = []
