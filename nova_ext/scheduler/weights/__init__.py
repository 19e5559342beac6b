# SPDX-License-Identifier: Apache-2.0
"""nova-ext scheduler weighers.

Operators list :func:`all_weighers` beside Nova's own in nova.conf::

    [filter_scheduler]
    weight_classes = nova.scheduler.weights.all_weighers,
                     nova_ext.scheduler.weights.all_weighers

It hands Nova one weigher, :class:`NovaExtWeighers`, which runs every
weigher of the ``nova_ext.scheduler.weights`` entry-point namespace. A
weigher's class path (``nova_ext.scheduler.weights.bin_packing.
BinPackingWeigher``) still loads that weigher on its own.
"""

import itertools
import operator

import numpy
from oslo_config import cfg
from oslo_log import log as logging

from nova.scheduler import utils as scheduler_utils
from nova.scheduler import weights
from nova import weights as nova_weights

from nova_ext import conf as ext_conf
from nova_ext import loader
from nova_ext.scheduler import aggregate_keys
from nova_ext.scheduler import scheduling_request

CONF = cfg.CONF
ext_conf.register_opts(CONF)
LOG = logging.getLogger(__name__)

NAMESPACE = 'nova_ext.scheduler.weights'

_WEIGHED_OBJECT = operator.attrgetter('obj')
_AGGREGATES = operator.attrgetter('aggregates')

# Nova's ServerGroupSoftAffinityWeigher and ServerGroupSoftAntiAffinityWeigher
# carry these policies; nova-ext's weighers must not outvote them.
SOFT_GROUP_POLICIES = ('soft-affinity', 'soft-anti-affinity')


def yields_to_group_policy(spec_obj, served=()):
    """True when the request's server group has a soft policy that Nova's
    own group weighers place by, and that is not among ``served`` (the
    policies the calling weigher itself implements). The weigher then gives
    every host the same weight, so packing or image locality never decides
    against the spreading or gathering the user asked for.
    """
    group = spec_obj.instance_group if 'instance_group' in spec_obj else None
    if group is None or 'policy' not in group:
        return False
    return group.policy in SOFT_GROUP_POLICIES and group.policy not in served


def all_weighers():
    """One weigher, :class:`NovaExtWeighers`, holding every weigher class
    registered in the ``nova_ext.scheduler.weights`` entry-point namespace,
    ours and third parties'.
    """
    return [NovaExtWeighers]


def plugin_weighers():
    """Every weigher class of the entry-point namespace."""
    return loader.load_plugin_classes(NAMESPACE, weights.BaseHostWeigher)


def scores(weigher, weighed_obj_list, spec_obj):
    """(raw weights, normalised weights, multipliers) of ``weigher`` for
    each object, computed as Nova's ``BaseWeightHandler`` computes them; the
    object's score is multiplier x normalised weight.
    """
    raw, normalised = _normalised(weigher, weighed_obj_list, spec_obj)
    return raw, normalised, _multipliers(weigher, weighed_obj_list)


def _normalised(weigher, weighed_obj_list, spec_obj):
    raw = weigher.weigh_objects(weighed_obj_list, spec_obj)
    return raw, list(nova_weights.normalize(
        raw, minval=weigher.minval, maxval=weigher.maxval))


def _multipliers(weigher, weighed_obj_list):
    return [weigher.weight_multiplier(obj.obj) for obj in weighed_obj_list]


def _add_scores(totals, normalised, multipliers):
    """``totals`` plus each object's score (multiplier x weight), as a new
    array: float64 arithmetic, so the sums are Python's, bit for bit.
    """
    return totals + numpy.asarray(multipliers, dtype=float) * numpy.asarray(
        normalised, dtype=float)


def normalised(raw, minval=None, maxval=None):
    """Nova's ``weights.normalize`` of ``raw`` (a list, or an array of
    floats) as an array, or None when every weight normalises to 0: same
    bounds, same float operations, at a price per host paid in NumPy rather
    than in a Python generator.
    """
    values = numpy.asarray(raw, dtype=float)
    if not len(values):
        return None
    # the largest and least of floats are the same numbers in NumPy
    maxval = float(values.max() if maxval is None else maxval)
    minval = float(values.min() if minval is None else minval)
    if minval == maxval:
        return None
    weights = (values - minval) / (maxval - minval)
    return weights if weights.any() else None


def _number(weight):
    """``weight`` as a Python number (an element of an array is NumPy's)."""
    return weight.item() if isinstance(weight, numpy.generic) else weight


def expand(weighers):
    """``weighers`` with each :class:`NovaExtWeighers` replaced by the
    weighers it runs, for whoever explains a ranking weigher by weigher.
    """
    for weigher in weighers:
        if isinstance(weigher, NovaExtWeighers):
            yield from weigher.parts
        else:
            yield weigher


class NovaExtWeighers(weights.BaseHostWeigher):
    """Every nova-ext weigher in one slot of Nova's weight handler.

    It runs each weigher of the entry-point namespace exactly as Nova's
    ``BaseWeightHandler`` would (:func:`scores`: raw weights normalised,
    times the multiplier, aggregate overrides included) and returns, per
    host, the sum of their scores. The handler takes the sums unchanged:
    normalising between ``minval`` 0 and ``maxval`` 1 is the identity and
    the multiplier is 1. So the ranking, and each host's weight, are the
    ones the weighers would give one by one, while Nova's handler pays its
    price per weigher and per host (debug-log dicts, a formatted string, a
    multiplier call, whatever the log level) once for all of them.

    nova-ext's own price per host is paid as little as possible: a weigher
    standing aside (a soft group policy it leaves to Nova, all its weights
    equal) costs no multiplier, and the multipliers of the
    :class:`PerRequestWeigher` parts are read together
    (:func:`multipliers_per_part`), one look at a host's aggregates for all
    of them instead of one per weigher.

    A weigher that raises is logged and left out of that request, so a
    broken third-party weigher costs its own vote, not the scheduler.
    """

    minval = 0.0
    maxval = 1.0

    def __init__(self):
        super().__init__()
        self.parts = [cls() for cls in plugin_weighers()]

    def weight_multiplier(self, host_state):
        # an int: Nova's handler formats the multiplier into a debug string
        # for every host whatever the log level, and 1 formats in half the
        # time 1.0 does; 1 * weight is the weight
        return 1

    def weigh_objects(self, weighed_obj_list, spec_obj):
        """Each host's nova-ext score: the sum over the weighers of
        multiplier x normalised weight, as Nova's handler would add them.
        """
        return self.total_scores(weighed_obj_list, spec_obj)

    def total_scores(self, weighed_obj_list, spec_obj):
        return self._weigh_objects(weighed_obj_list, spec_obj).tolist()

    def _weigh_objects(self, weighed_obj_list, spec_obj):
        host_states = list(map(_WEIGHED_OBJECT, weighed_obj_list))
        totals = numpy.zeros(len(host_states))
        # (part, normalised weights) of the per-request parts that have
        # something to say: their multipliers are read together, below
        voting = []
        for part in self.parts:
            try:
                if isinstance(part, PerRequestWeigher):
                    normalised, promises = (
                        part.normalised_weights_and_promises(spec_obj,
                                                             host_states))
                    if normalised is not None:
                        voting.append((part, normalised, promises))
                    continue
                _raw, normalised = _normalised(part, weighed_obj_list,
                                               spec_obj)
                if not any(normalised):
                    # standing aside (a request it has nothing to say
                    # about): no score to add, whatever the multipliers
                    continue
                multipliers = _multipliers(part, weighed_obj_list)
            except Exception:
                LOG.exception("nova-ext: %s failed for instance %s; it is "
                              "left out of this request's weighing",
                              type(part).__name__,
                              getattr(spec_obj, 'instance_uuid', None))
                continue
            totals = self._add(totals, part, host_states, normalised,
                               multipliers)
        # per host, the promises broken by the parts that make some
        broken = None
        if voting:
            try:
                columns = multipliers_per_part(
                    [part for part, _normalised, _promises in voting],
                    host_states, spec_obj)
            except Exception:
                # part by part, so that whatever failed costs one vote
                columns = [None] * len(voting)
            for (part, normalised, promises), multipliers in zip(voting,
                                                                 columns):
                if multipliers is None:
                    try:
                        multipliers = [part.weight_multiplier(host_state)
                                       for host_state in host_states]
                    except Exception:
                        LOG.exception("nova-ext: %s failed for instance %s; "
                                      "it is left out of this request's "
                                      "weighing", type(part).__name__,
                                      getattr(spec_obj, 'instance_uuid',
                                              None))
                        continue
                totals = self._add(totals, part, host_states, normalised,
                                   multipliers)
                if promises is not None:
                    # a weigher turned off (0) or reversed (negative) on a
                    # host makes it no promise there
                    kept = numpy.asarray(promises, dtype=float) * (
                        numpy.asarray(multipliers, dtype=float) > 0)
                    broken = kept if broken is None else broken + kept
        if broken is not None and broken.max() > broken.min():
            totals = outranked(self, totals, broken, weighed_obj_list,
                               host_states, spec_obj)
        return totals

    @staticmethod
    def _add(totals, part, host_states, normalised, multipliers):
        """``totals`` plus ``part``'s scores, as a new array."""
        if LOG.isEnabledFor(logging.DEBUG):
            LOG.debug("%s: score (multiplier * weight) %s",
                      type(part).__name__,
                      {(host_state.host, host_state.nodename): '%s * %s' % (
                          multiplier, weight) for host_state, weight,
                       multiplier in zip(host_states, normalised,
                                         multipliers)})
        return _add_scores(totals, normalised, multipliers)

    def _weigh_object(self, host_state, spec_obj):
        return self.total_scores(
            [nova_weights.WeighedObject(host_state, 0.0)], spec_obj)[0]


def outranked(slot, totals, broken, weighed_obj_list, host_states,
              spec_obj):
    """``totals`` (the slot's scores) less, for each host, its broken
    promises times more than every weigher together can swing between two
    hosts: a host breaking fewer soft constraints then ranks above one
    breaking more, whatever the scores; among equals, the scores decide.

    What the others can swing: the weighers Nova's handler ran before the
    slot, exactly (the weights they left on ``weighed_obj_list``); the
    slot's own scores, exactly; each weigher after the slot, at most its
    largest multiplier among the hosts (a weigher's normalised weight
    spans at most 0 to 1). Which weighers run, and in what order, is the
    request's (:attr:`SchedulingRequest.weighers`); none known after the
    slot when no request is open.
    """
    before = [getattr(weighed, 'weight', 0.0) for weighed in weighed_obj_list]
    swing = 1.0 + (max(before) - min(before)) + (totals.max() - totals.min())
    request = scheduling_request.find(spec_obj)
    weighers = request.weighers if request is not None else []
    after = weighers[weighers.index(slot) + 1:] if slot in weighers else []
    if after:
        # the hosts of one aggregate set share every multiplier
        representatives = {}
        for host_state in host_states:
            representatives.setdefault(
                tuple(map(id, host_state.aggregates)), host_state)
        for weigher in after:
            swing += max(abs(weigher.weight_multiplier(host_state))
                         for host_state in representatives.values())
    return totals - broken * swing


def _aggregates_of(host_states):
    """Each aggregate object of ``host_states`` once, in a dict's keys (the
    hosts of a rack share theirs: Nova's objects hash by identity).
    """
    return dict.fromkeys(itertools.chain.from_iterable(
        map(_AGGREGATES, host_states)))


def multipliers_per_part(parts, host_states, spec_obj):
    """[an array: the multiplier of each host, in the order of
    ``host_states``] for each of ``parts`` (PerRequestWeighers), what
    their ``weight_multiplier`` would say host by host for request
    ``spec_obj``.

    Most clouds have no aggregate overriding a nova-ext multiplier: every
    host then gets every part's configured multiplier, found by reading
    either the request's view of the aggregates (:attr:`SchedulingRequest.
    aggregates`, every aggregate of the cloud: a few hundred objects
    rather than ten thousand hosts) or each aggregate object of the hosts
    once (the hosts of a rack share it), whichever is fewer reads. When
    one overrides, a host in an overriding aggregate gets Nova's answer,
    part by part.
    """
    configured = [getattr(CONF.nova_ext, part.multiplier_option)
                  for part in parts]
    keys = [part._aggregate_key for part in parts]
    columns = [numpy.full(len(host_states), multiplier, dtype=float)
               for multiplier in configured]
    any_key = frozenset(keys)
    request = scheduling_request.find(spec_obj)
    # the view, when it is the smaller read: an aggregate's metadata costs
    # about four hosts' aggregates (10,000 candidates in 500 racks: the
    # view; 1,000 candidates of that cloud: their 50 racks)
    if request is not None and (
            len(request.aggregates) * 4 <= len(host_states)) and not any(
                not any_key.isdisjoint(aggregate.metadata)
                for aggregate in request.aggregates):
        return columns
    # every aggregate object of the hosts once: a rack's hosts share them
    aggregates = _aggregates_of(host_states)
    # one read of a versioned object's field per aggregate
    overriding = {aggregate for aggregate in aggregates
                  if not any_key.isdisjoint(aggregate.metadata)}
    if not overriding:
        return columns
    for index, host_state in enumerate(host_states):
        if not overriding.isdisjoint(host_state.aggregates):
            for column, key, multiplier in zip(columns, keys, configured):
                # Nova's reading: the least of the host's aggregates'
                # values, the configured one where none carries the key
                # or a value is not a number
                column[index] = scheduler_utils.get_weight_multiplier(
                    host_state, key, multiplier)
    return columns


class PerRequestWeigher(weights.BaseHostWeigher):
    """A weigher that works out what it needs once per request.

    Subclasses implement ``prepare(spec_obj, host_states)``, returning
    whatever per-request state they need, and ``weigh(host_state, state)``,
    which must be O(1). A weigher that runs for every candidate of a large
    cloud may implement ``weigh_all(host_states, state)`` instead, its loop
    then paying no method call per host (``weigh`` is then
    ``weigh_all([host_state], state)[0]``). The state lives on the stack,
    never on ``self``: nova-scheduler shares one weigher instance between
    its worker threads.

    ``multiplier_option`` names the ``[nova_ext]`` option holding the
    multiplier; host aggregates override it with the metadata key
    ``nova_ext:<multiplier_option>``, as upstream weighers do.

    For a server group with a soft policy (soft-affinity,
    soft-anti-affinity) the weigher gives every host the same weight, unless
    the subclass lists the policy in ``group_policies_served``: Nova's group
    weighers place those requests.

    A weigher that fails is logged and gives every host the same weight, so
    the request is scheduled as if the weigher were off.
    """

    multiplier_option = None
    # Soft server-group policies this weigher implements itself; for any
    # other soft policy it stands aside (yields_to_group_policy).
    group_policies_served = ()

    def __init__(self):
        super().__init__()
        self._aggregate_key = aggregate_keys.multiplier_key(
            self.multiplier_option)

    def weight_multiplier(self, host_state):
        """The configured multiplier, or the least of the host's aggregates'
        values for its key (Nova's reading, as upstream weighers do). In
        :class:`NovaExtWeighers`, :func:`multipliers_per_part` gives the
        same for all hosts at once.
        """
        return scheduler_utils.get_weight_multiplier(
            host_state, self._aggregate_key,
            getattr(CONF.nova_ext, self.multiplier_option))

    def prepare(self, spec_obj, host_states):
        raise NotImplementedError()

    def weigh(self, host_state, state):
        """The weight of one host: :meth:`weigh_all` over that host alone,
        for a subclass that implements ``weigh_all``.
        """
        if type(self).weigh_all is PerRequestWeigher.weigh_all:
            raise NotImplementedError()
        return _number(self.weigh_all([host_state], state)[0])

    def weigh_all(self, host_states, state):
        """The weight of each of ``host_states`` (a list, or a NumPy array
        of floats): :meth:`weigh` host by host, unless a subclass computes
        them together.
        """
        weigh = self.weigh
        return [weigh(host_state, state) for host_state in host_states]

    def broken_promises(self, host_states, state):
        """How many of the request's promises each host would break that
        no other weigher may outvote (FailureDomainSpreadWeigher: the
        soft spread constraints), or None: this weigher makes none.
        """
        return None

    def raw_weights(self, spec_obj, host_states):
        """The weight of each of ``host_states``, or None when the weigher
        stands aside for this request: a soft group policy it leaves to
        Nova's weighers, or a failure (logged).
        """
        return self.weights_and_promises(spec_obj, host_states)[0]

    def weights_and_promises(self, spec_obj, host_states):
        """(:meth:`raw_weights`, :meth:`broken_promises`), from one
        :meth:`prepare`; (None, None) when the weigher stands aside.
        """
        if yields_to_group_policy(spec_obj, self.group_policies_served):
            return None, None
        try:
            state = self.prepare(spec_obj, host_states)
            return (self.weigh_all(host_states, state),
                    self.broken_promises(host_states, state))
        except Exception:
            LOG.exception("nova-ext: %s failed for instance %s; every host "
                          "gets the same weight from it for this request",
                          type(self).__name__, spec_obj.instance_uuid)
            return None, None

    def normalised_weights(self, spec_obj, host_states):
        """The weights normalised as Nova's weight handler does, or None
        when they are all equal (all 0 once normalised) or the weigher
        stands aside: its score is then 0 for every host, whatever the
        multipliers, which need not be read.
        """
        return self.normalised_weights_and_promises(spec_obj,
                                                    host_states)[0]

    def normalised_weights_and_promises(self, spec_obj, host_states):
        """(:meth:`normalised_weights`, :meth:`broken_promises`)."""
        raw, promises = self.weights_and_promises(spec_obj, host_states)
        if raw is None:
            return None, None
        return (normalised(raw, minval=self.minval, maxval=self.maxval),
                promises)

    def weigh_objects(self, weighed_obj_list, spec_obj):
        host_states = [weighed.obj for weighed in weighed_obj_list]
        raw = self.raw_weights(spec_obj, host_states)
        if raw is None:
            return [0.0] * len(host_states)
        # Nova's handler is handed a list of Python numbers
        return raw.tolist() if isinstance(raw, numpy.ndarray) else raw

    def _weigh_object(self, host_state, spec_obj):
        return self.weigh(host_state, self.prepare(spec_obj, [host_state]))
