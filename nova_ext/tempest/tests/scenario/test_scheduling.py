# SPDX-License-Identifier: Apache-2.0
"""nova-ext's scheduling features seen from the API: where servers land
(admin view ``OS-EXT-SRV-ATTR:host``), what fails and what the fault says.

Each class needs its feature enabled in ``[nova_ext_feature_enabled]`` and
skips otherwise. Tests create their own aggregates, flavors, server groups
and traits and remove them, so they run on a shared cloud; they need at
least two enabled compute hosts with room for a few 64 MB servers.
"""

from tempest import config
from tempest.lib.common.utils import data_utils
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from nova_ext.tempest.tests import base

CONF = config.CONF
TRAIT_PREFIX = 'CUSTOM_NOVA_EXT_FD_'


class FailureDomainSpreadTest(base.NovaExtTest):
    """Given hosts in failure domains (aggregates or compute traits), when
    members of a server group ask to spread across them, then no two share
    a domain and the member that finds no domain left fails.
    """

    feature = 'failure_domain_filter'

    def domains(self):
        """{host: domain} at the spread level, from aggregates, else from
        the compute-reported traits of the host's provider.
        """
        level = CONF.nova_ext.spread_level
        key = 'nova_ext:failure_domain:' + level
        found = {}
        for aggregate in self.aggregates.list_aggregates()['aggregates']:
            if key in (aggregate.get('metadata') or {}):
                for host in aggregate['hosts']:
                    found[host] = aggregate['metadata'][key]
        prefix = TRAIT_PREFIX + level.upper() + '_'
        hypervisors = self.os_admin.hypervisor_client.list_hypervisors(
            detail=True)['hypervisors']
        for hypervisor in hypervisors:
            host = hypervisor['service']['host']
            if host in found:
                continue
            # from microversion 2.53 a hypervisor's id is its provider's
            traits = self.providers.list_resource_provider_traits(
                hypervisor['id'])['traits']
            mine = [t[len(prefix):] for t in traits if t.startswith(prefix)]
            if len(mine) == 1:
                found[host] = mine[0]
        return {host: domain for host, domain in found.items()
                if host in self.compute_hosts()}

    @decorators.idempotent_id('7d0cbb0e-3f0c-4d35-a1b9-2c5a4c51d201')
    def test_group_members_spread_across_domains(self):
        domains = self.domains()
        distinct = sorted(set(domains.values()))
        if len(distinct) < 2:
            raise self.skipException(
                'needs hosts in 2 or more %s domains; found %s'
                % (CONF.nova_ext.spread_level, distinct))
        group = self.server_groups.create_server_group(
            name=data_utils.rand_name('nova-ext'),
            policy='anti-affinity')['server_group']
        self.addCleanup(self.server_groups.delete_server_group,
                        group['id'])
        hints = {'group': group['id'],
                 'nova_ext:spread_level': CONF.nova_ext.spread_level}
        flavor = self.create_flavor()
        members = min(len(distinct), 3)
        placed = [self.boot(flavor, hints=hints) for _ in range(members)]
        used = [domains[self.host_of(server)] for server in placed]
        self.assertEqual(members, len(set(used)),
                         'members share a domain: %s' % used)
        if members == len(distinct):
            extra = self.boot(flavor, hints=hints, wait_for='ERROR')
            self.assertIn('No valid host', extra['fault']['message'])


class BinPackingTest(base.NovaExtTest):
    """Given BinPackingWeigher deciding, when two servers of one flavor are
    booted one after the other, then the second goes to the host the first
    filled, not to an empty one.
    """

    feature = 'bin_packing_weigher'

    @decorators.idempotent_id('7d0cbb0e-3f0c-4d35-a1b9-2c5a4c51d202')
    def test_second_server_packs_onto_the_first_host(self):
        if len(self.compute_hosts()) < 2:
            raise self.skipException('needs 2 or more compute hosts')
        flavor = self.create_flavor()
        first = self.boot(flavor)
        second = self.boot(flavor)
        self.assertEqual(self.host_of(first), self.host_of(second))


class HostClassTest(base.NovaExtTest):
    """Given a host aggregate tagged with a host class, when a flavor asks
    for that class, then its servers land only there; an unknown class
    fails with a reason naming it.
    """

    feature = 'host_class'

    @decorators.idempotent_id('7d0cbb0e-3f0c-4d35-a1b9-2c5a4c51d203')
    def test_flavor_routes_to_its_class(self):
        hosts = self.compute_hosts()
        if len(hosts) < 2:
            raise self.skipException('needs 2 or more compute hosts')
        host_class = data_utils.rand_name('tempest').replace('-', '')[-20:]
        self.create_aggregate([hosts[-1]], {'nova_ext:host_class':
                                            host_class})
        flavor = self.create_flavor({'nova_ext:host_class': host_class})
        for _ in range(2):
            self.assertEqual(hosts[-1], self.host_of(self.boot(flavor)))

    @decorators.idempotent_id('7d0cbb0e-3f0c-4d35-a1b9-2c5a4c51d204')
    def test_unknown_class_fails_with_a_reason(self):
        flavor = self.create_flavor({'nova_ext:host_class': 'nosuchclass'})
        server = self.boot(flavor, wait_for='ERROR')
        self.assertIn('nosuchclass', server['fault']['message'])


class MaintenanceTest(base.NovaExtTest):
    """Given a host whose provider carries the maintenance trait, when an
    admin asks for that very host, then placement never offers it; after
    the trait is removed the same request lands there.
    """

    feature = 'maintenance'

    def set_maintenance(self, provider, on):
        trait = CONF.nova_ext.maintenance_trait
        current = self.providers.list_resource_provider_traits(provider)
        traits = set(current['traits'])
        traits = traits | {trait} if on else traits - {trait}
        self.providers.update_resource_provider_traits(
            provider, traits=sorted(traits),
            resource_provider_generation=current[
                'resource_provider_generation'])

    @decorators.idempotent_id('7d0cbb0e-3f0c-4d35-a1b9-2c5a4c51d205')
    def test_host_in_maintenance_is_never_chosen(self):
        host = self.compute_hosts()[0]
        provider = self.providers.list_resource_providers(
            name=host)['resource_providers'][0]['uuid']
        self.placement.create_trait(CONF.nova_ext.maintenance_trait)
        self.set_maintenance(provider, True)
        self.addCleanup(self.set_maintenance, provider, False)
        flavor = self.create_flavor()
        refused = self.boot(flavor, host=host, wait_for='ERROR',
                            client=self.admin_servers)
        self.assertIn('No valid host', refused['fault']['message'])
        self.set_maintenance(provider, False)
        self.assertEqual(host, self.host_of(self.boot(
            flavor, host=host, client=self.admin_servers)))


class PerFlavorQuotaTest(base.NovaExtTest):
    """Given a flavor limited to N instances per project, when a user boots
    N + 1, then the last is refused with 403 and the numbers.
    """

    feature = 'per_flavor_quota'

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.nova_ext.quota_limited_flavor:
            raise cls.skipException('[nova_ext] quota_limited_flavor unset')

    @decorators.idempotent_id('7d0cbb0e-3f0c-4d35-a1b9-2c5a4c51d206')
    def test_over_the_flavor_limit_is_403_with_the_numbers(self):
        flavor = CONF.nova_ext.quota_limited_flavor
        limit = CONF.nova_ext.quota_limited_instances
        for _ in range(limit):
            self.boot(flavor)
        error = self.assertRaises(
            lib_exc.Forbidden, self.servers.create_server,
            name=data_utils.rand_name('nova-ext'),
            imageRef=CONF.compute.image_ref, flavorRef=flavor,
            networks='none')
        message = str(error)
        self.assertIn('Quota exceeded for instances of flavor', message)
        self.assertIn('already used %d of %d' % (limit, limit), message)
