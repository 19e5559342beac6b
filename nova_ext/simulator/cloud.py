# SPDX-License-Identifier: Apache-2.0
"""The simulated cloud's placement, glance and databases.

Placement: one resource provider per compute node, in the placement
aggregates of its host's Nova aggregates (same uuids, as Nova mirrors
them), with the traits the cluster model gives its host group, the
maintenance trait on hosts in maintenance, and ``OWNER_NOVA`` (every
simulated compute runs the current Nova). :func:`parse_query` reads the
``GET /allocation_candidates`` query Nova builds for a request
(``ResourceRequest.to_querystring``) and :meth:`SimulatedCloud.eligible`
answers its traits and aggregates as placement does; inventory is the
simulator's own bookkeeping.

The rest is what nova-ext's plugins ask a cloud (:class:`nova_ext.
scheduler.cloud.Cloud`): aggregates by metadata key, image properties,
which hosts run an image, whether a trait exists; the engine opens each
request with this cloud and with the group's members counted, and the
model declares failure domains by aggregates only.
"""

import collections
import dataclasses
import typing as ty
import urllib.parse

from nova_ext.scheduler import cloud

# what a compute of the current Nova reports (Nova 34's owner_nova_filter
# requires it on the root provider)
OWNER_NOVA = 'OWNER_NOVA'


@dataclasses.dataclass(frozen=True)
class Query:
    """What one ``GET /allocation_candidates`` asks of a provider. Every
    request group lands on the host's one provider, so the groups' amounts
    are summed and their traits and aggregates all apply to it.
    """
    resources: ty.Dict[str, int]
    required: ty.FrozenSet[str] = frozenset()
    forbidden: ty.FrozenSet[str] = frozenset()
    # each: at least one of these traits ("in:" of placement 1.39)
    any_traits: ty.Tuple[ty.FrozenSet[str], ...] = ()
    # each: member of at least one of these aggregates
    member_of: ty.Tuple[ty.FrozenSet[str], ...] = ()
    not_member_of: ty.FrozenSet[str] = frozenset()
    # at most this many candidates: [scheduler] max_placement_results,
    # which Nova leaves out of a request naming a server group (or
    # same_host, different_host)
    limit: ty.Optional[int] = None

    def constraints(self):
        """Everything but the amounts: what :meth:`SimulatedCloud.eligible`
        answers.
        """
        return (self.required, self.forbidden, self.any_traits,
                self.member_of, self.not_member_of)


def parse_query(querystring):
    """A :class:`Query` from placement's query string."""
    resources = collections.Counter()
    required, forbidden = set(), set()
    any_traits, member_of, not_member_of = [], [], set()
    limit = None
    for key, value in urllib.parse.parse_qsl(querystring):
        if key == 'limit':
            limit = int(value)
        elif key.startswith('resources'):
            for item in filter(None, value.split(',')):
                resource_class, _, amount = item.partition(':')
                resources[resource_class] += int(amount)
        elif key.startswith(('required', 'root_required')):
            if value.startswith('in:'):
                any_traits.append(frozenset(value[3:].split(',')))
                continue
            for trait in filter(None, value.split(',')):
                if trait.startswith('!'):
                    forbidden.add(trait[1:])
                else:
                    required.add(trait)
        elif key.startswith('member_of'):
            if value.startswith('!'):
                value = value[1:]
                uuids = value[3:] if value.startswith('in:') else value
                not_member_of.update(uuids.split(','))
            else:
                uuids = value[3:] if value.startswith('in:') else value
                member_of.append(frozenset(uuids.split(',')))
    return Query(dict(resources), frozenset(required), frozenset(forbidden),
                 tuple(any_traits), tuple(member_of),
                 frozenset(not_member_of), limit=limit)


class SimulatedCloud(cloud.Cloud):
    """One simulated cloud for one run: ``hosts`` (host names, in fleet
    order), ``aggregates`` (``objects.Aggregate``), ``traits`` ({host:
    traits}), ``images`` ({image id: properties}), ``domains`` ({level:
    {host: domains}}, for the replay's own checks). ``hosts_with_image``
    ({image id: host names}) is the replay's to keep current.
    """

    def __init__(self, hosts, aggregates, traits, images, domains):
        self.hosts = list(hosts)
        self.aggregates = list(aggregates)
        self.images = images
        self.domains = domains
        self.hosts_with_image = collections.defaultdict(set)
        member = collections.defaultdict(set)
        for aggregate in self.aggregates:
            for host in aggregate.hosts:
                member[host].add(aggregate.uuid)
        self.provider_aggregates = [frozenset(member[host])
                                    for host in self.hosts]
        self.provider_traits = [frozenset(traits.get(host, ()))
                                for host in self.hosts]
        self._eligible = {}

    # -- placement --

    def eligible(self, query):
        """Indexes of the providers whose traits and aggregates satisfy
        ``query`` (its amounts aside), as placement selects them.
        """
        key = query.constraints()
        found = self._eligible.get(key)
        if found is None:
            found = self._eligible[key] = [
                index for index in range(len(self.hosts))
                if self._satisfies(index, query)]
        return found

    def _satisfies(self, index, query):
        traits = self.provider_traits[index]
        aggregates = self.provider_aggregates[index]
        return (query.required <= traits
                and not query.forbidden & traits
                and all(any_of & traits for any_of in query.any_traits)
                and all(any_of & aggregates for any_of in query.member_of)
                and not query.not_member_of & aggregates)

    # -- what nova-ext's plugins ask --

    def aggregates_with_key(self, context, key):
        return [aggregate for aggregate in self.aggregates
                if key in aggregate.metadata]

    def image_properties(self, context, image_id):
        return dict(self.images.get(image_id, {}))

    def hosts_running_image(self, image_id):
        return frozenset(self.hosts_with_image[image_id])

    def trait_exists(self, trait):
        # the model's placement filters by the hosts' traits and refuses
        # no trait it has not seen
        return True

    def failure_domain_traits(self, level):
        # the model declares its failure domains by aggregates
        return {}
