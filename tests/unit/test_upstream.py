# SPDX-License-Identifier: Apache-2.0
"""The Nova internals nova-ext relies on are there, as nova-ext expects them,
in the Nova this venv runs (CI runs this on 2026.1 and 2026.2)."""

import testtools

from nova_ext import upstream


class UpstreamInternalsTest(testtools.TestCase):

    def test_running_nova_is_supported(self):
        self.assertIn(upstream.nova_major(), upstream.SUPPORTED_NOVA_MAJORS)

    def test_every_internal_is_present_with_its_signature(self):
        self.assertEqual([], upstream.problems())

    def test_a_changed_signature_is_named(self):
        moved = upstream.Internal(
            'nova.compute.utils.check_num_instances_quota',
            '(context, flavor)', 'test')
        [problem] = upstream.problems([moved])
        self.assertIn('nova.compute.utils.check_num_instances_quota: '
                      'signature changed: nova-ext expects (context, flavor)',
                      problem)

    def test_a_missing_internal_is_named(self):
        gone = upstream.Internal('nova.scheduler.manager.NoSuchManager.run',
                                 None, 'test')
        [problem] = upstream.problems([gone])
        self.assertTrue(problem.startswith(
            'nova.scheduler.manager.NoSuchManager.run: missing'), problem)

    def test_every_internal_is_used_by_nova_ext(self):
        # An entry nobody uses any more hides the real list.
        import pathlib
        source = '\n'.join(
            path.read_text() for path in pathlib.Path(
                upstream.__file__).parent.rglob('*.py')
            if path.name != 'upstream.py')
        for internal in upstream.INTERNALS:
            name = internal.path.rsplit('.', 1)[-1]
            if name == '_QuotaEngine__driver_override':
                name = '__driver_override'
            self.assertIn(name, source, internal.path)
