# SPDX-License-Identifier: Apache-2.0
"""Activation of the quota driver: idempotent, refused next to a non-DB
Nova quota driver, undone by deactivate, never raising into Nova.
"""

from nova.compute import api as compute_api
from nova.compute import utils as compute_utils
from nova import quota as nova_quota
from nova import test

from nova_ext import activation
from nova_ext import quota
from nova_ext.quota import per_flavor


class QuotaActivationTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        quota.deactivate()
        self.addCleanup(quota.deactivate)
        self.nova_check = compute_utils.check_num_instances_quota
        self.nova_upsize = compute_api.API.__dict__['_check_quota_for_upsize']
        self.nova_count = nova_quota._instances_cores_ram_count_legacy

    def test_nothing_configured_nothing_changed(self):
        self.assertIsNone(quota.activate())
        self.assertIs(self.nova_check, compute_utils.check_num_instances_quota)

    def test_activate_twice_wraps_once_and_deactivate_restores(self):
        self.flags(quota_driver='per_flavor', group='nova_ext')
        self.assertEqual('per_flavor', quota.activate(binary='nova-api'))
        wrapped = compute_utils.check_num_instances_quota
        self.assertEqual('per_flavor', quota.activate(binary='nova-api'))
        self.assertIs(wrapped, compute_utils.check_num_instances_quota)
        self.assertIs(self.nova_check, wrapped.__wrapped__)
        self.assertIsInstance(nova_quota.QUOTAS._driver,
                              per_flavor.PerFlavorQuotaDriver)
        # Nova's instance count is the driver's (Nova's check still looks
        # it up in its module at each call).
        count = nova_quota._instances_cores_ram_count_legacy
        self.assertIs(nova_quota.QUOTAS._driver, count.__self__)
        self.assertEqual('count_instances_cores_ram', count.__name__)

        quota.deactivate()
        self.assertIs(self.nova_count,
                      nova_quota._instances_cores_ram_count_legacy)
        self.assertIs(self.nova_check, compute_utils.check_num_instances_quota)
        self.assertIs(self.nova_upsize,
                      compute_api.API.__dict__['_check_quota_for_upsize'])
        self.assertNotIsInstance(nova_quota.QUOTAS._driver,
                                 per_flavor.PerFlavorQuotaDriver)

    def test_refused_next_to_another_nova_quota_driver(self):
        self.flags(quota_driver='per_flavor', group='nova_ext')
        self.flags(driver='nova.quota.NoopQuotaDriver', group='quota')
        self.assertRaises(quota.ActivationError, quota.activate)
        # What a Nova process sees: an ERROR line, Nova's own code intact.
        self.assertIsNone(activation.activate_process(binary='nova-api'))
        self.assertIn('quota driver per_flavor NOT activated',
                      self.stdlog.logger.output)
        self.assertIs(self.nova_check, compute_utils.check_num_instances_quota)

    def test_unknown_driver_name_is_logged_not_raised(self):
        self.flags(quota_driver='no-such-driver', group='nova_ext')
        self.assertIsNone(activation.activate_process(binary='nova-api'))
        self.assertIn('quota driver no-such-driver NOT activated',
                      self.stdlog.logger.output)


class CheckMemoTest(test.NoDBTestCase):
    """Nova's count and the driver's flavor check of one quota check share
    a memo; the next check (in the same thread) starts with an empty one.
    """

    def test_one_memo_per_check_none_outside(self):
        seen = []

        class Driver:
            def check_flavor_instances(self, context, flavor, min_count,
                                       max_count, project_id, orig_num_req):
                seen.append(quota.check_memo())
                return max_count

        def nova_check(context, flavor, min_count, max_count, **kwargs):
            memo = quota.check_memo()
            self.assertEqual({}, memo)  # nothing left from the last check
            memo['counted'] = context
            return max_count

        checked = quota._with_flavor_check(nova_check, Driver())
        self.assertIsNone(quota.check_memo())
        self.assertEqual(1, checked('first', None, 1, 1, project_id='p'))
        self.assertEqual(2, checked('second', None, 1, 2, project_id='p'))
        self.assertEqual([{'counted': 'first'}, {'counted': 'second'}],
                         seen)
        self.assertIsNone(quota.check_memo())


class WhoMustActivateTest(test.NoDBTestCase):
    """activation_states decides, for the start-up log line and the quota
    check alike, which API and conductor services must have activated
    nova-ext. Its inputs are Nova's service records (by cell) and
    nova-ext's activation records, as the databases would return them.
    """

    def states(self, services, recorded):
        self.stub_out('nova_ext.activation.nova_services_by_cell',
                      lambda conf: sorted(services))
        self.stub_out('nova_ext.quota.db.list_activations',
                      lambda conf: [(host, binary, 1, driver, 'then')
                                    for host, binary, driver in recorded])
        states = activation.activation_states(None, 'per_flavor')
        problems = activation.consistency_problems(None, 'per_flavor')
        return {(binary, host): (when, agrees)
                for binary, host, _driver, when, agrees in states}, problems

    CELL_CONDUCTORS = [('cell1-conductor', 'nova-conductor', False),
                       ('cell2-conductor', 'nova-conductor', False)]

    def test_superconductor_registered_cell_conductors_need_nothing(self):
        states, problems = self.states(
            self.CELL_CONDUCTORS + [('super', 'nova-conductor', True)],
            [('super', 'nova-conductor', 'per_flavor')])
        self.assertEqual((activation.CELL_CONDUCTOR, True),
                         states['nova-conductor', 'cell1-conductor'])
        self.assertEqual([], problems)

    def test_superconductor_starting_before_its_service_record(self):
        # What a superconductor sees the moment it activates, on a cloud
        # whose cell conductors registered first: its own activation
        # record, no service record of its own yet.
        states, problems = self.states(
            self.CELL_CONDUCTORS,
            [('super', 'nova-conductor', 'per_flavor')])
        self.assertEqual((activation.CELL_CONDUCTOR, True),
                         states['nova-conductor', 'cell2-conductor'])
        self.assertEqual([], problems)

    def test_single_conductor_must_activate(self):
        states, problems = self.states(
            [('cond', 'nova-conductor', False),
             ('api', 'nova-osapi_compute', False)],
            [('api', 'nova-osapi_compute', 'per_flavor')])
        self.assertEqual((None, False), states['nova-conductor', 'cond'])
        self.assertEqual(['nova-conductor on cond has not activated '
                          'nova-ext (no ?plugin=nova_ext in its '
                          '[api_database] connection, or not restarted)'],
                         problems)

    def test_single_conductor_that_activated_is_no_superconductor(self):
        _states, problems = self.states(
            [('cond', 'nova-conductor', False),
             ('other', 'nova-conductor', False)],
            [('cond', 'nova-conductor', 'per_flavor')])
        self.assertEqual(['nova-conductor on other has not activated '
                          'nova-ext (no ?plugin=nova_ext in its '
                          '[api_database] connection, or not restarted)'],
                         problems)
