# SPDX-License-Identifier: Apache-2.0
"""A reason nova-ext gives for a scheduling failure arrives whole in the
server's fault: Nova formats the NoValidHost (a failed request pre-filter's
reason wrapped once more) and cuts the message to 255 bytes
(``nova.compute.utils.exception_to_dict``). Checked with Nova's own code,
for any text, and for every place in nova_ext that raises one.
"""

import ast
import os

import hypothesis
from hypothesis import strategies as st
import testtools

from nova.compute import utils as compute_utils
from nova import exception

from nova_ext.scheduler import fault_reasons

PACKAGE = os.path.join(os.path.dirname(__file__), '..', '..', 'nova_ext')


def fault_message(reason, failure):
    """The server's fault message, as Nova writes it, for ``reason``."""
    if failure is exception.RequestFilterFailed:
        # nova.scheduler.manager.SchedulerManager.select_destinations
        reason = exception.RequestFilterFailed(reason=reason).message
    return compute_utils.exception_to_dict(
        exception.NoValidHost(reason=reason))['message']


class FittedTest(testtools.TestCase):

    @hypothesis.given(st.text(max_size=400),
                      st.sampled_from((exception.NoValidHost,
                                       exception.RequestFilterFailed)))
    def test_nova_keeps_a_fitted_reason_whole(self, reason, failure):
        fitted = fault_reasons.fitted(reason, failure)
        message = fault_message(fitted, failure)
        self.assertTrue(message.endswith(fitted), (message, fitted))
        if fault_reasons.fits(reason, failure):
            self.assertEqual(reason, fitted)
        else:
            self.assertTrue(fitted.endswith(fault_reasons.ELLIPSIS))
            self.assertTrue(reason.startswith(
                fitted[:-len(fault_reasons.ELLIPSIS)]))

    def test_the_room_is_what_novas_text_leaves(self):
        # one byte more than the room and Nova cuts it
        for failure in (exception.NoValidHost, exception.RequestFilterFailed):
            room = fault_reasons.room(failure)
            whole = 'x' * room
            self.assertTrue(fault_message(whole, failure).endswith(whole))
            self.assertFalse(fault_message(whole + 'y', failure).endswith(
                'y'))


def _raises_without_fitting(path):
    """(line, exception) of each NoValidHost or RequestFilterFailed built
    in ``path`` with a reason that does not come from
    ``fault_reasons.fitted`` or a SchedulingRequest's ``why_no_host``
    (which :meth:`refuse` fitted).
    """
    with open(path) as source:
        tree = ast.parse(source.read())
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ('NoValidHost', 'RequestFilterFailed')):
            continue
        reason = next((k.value for k in node.keywords if k.arg == 'reason'),
                      None)
        fitted = (isinstance(reason, ast.Call)
                  and isinstance(reason.func, ast.Attribute)
                  and reason.func.attr == 'fitted')
        settled = (isinstance(reason, ast.Attribute)
                   and reason.attr == 'why_no_host')
        if not (fitted or settled):
            found.append((node.lineno, node.func.attr))
    return found


class EveryRaiseFitsTest(testtools.TestCase):

    def test_every_reason_nova_ext_raises_is_fitted(self):
        unfitted = {}
        raising = 0
        for directory, _dirs, files in os.walk(PACKAGE):
            for name in files:
                if not name.endswith('.py') or name == 'fault_reasons.py':
                    # (fault_reasons measures Nova's text with them)
                    continue
                path = os.path.join(directory, name)
                with open(path) as source:
                    if 'NoValidHost(' in source.read():
                        raising += 1
                found = _raises_without_fitting(path)
                if found:
                    unfitted[os.path.relpath(path, PACKAGE)] = found
        self.assertEqual({}, unfitted)
        # the scan sees the raises it is about
        self.assertGreaterEqual(raising, 3)
