# SPDX-License-Identifier: Apache-2.0
"""nova-ext's policy rules, enforced by Nova's own policy engine.

Listed by ``oslopolicy-sample-generator --namespace nova_ext`` (entry point
``oslo.policy.policies``) and overridden in Nova's policy file
(``[oslo_policy] policy_file``, ``policy.yaml`` by default) like any Nova
rule::

    "nova_ext:ignore_maintenance": "role:admin or role:operator"

Nova's enforcer registers only Nova's rules, and enforcing an unregistered
rule is an error, so :func:`authorize` registers nova-ext's on it first.
"""

import threading

from oslo_policy import policy

from nova import exception
from nova import policy as nova_policy

from nova_ext import upstream

IGNORE_MAINTENANCE = 'nova_ext:ignore_maintenance'

RULES = (
    policy.DocumentedRuleDefault(
        name=IGNORE_MAINTENANCE,
        check_str='rule:context_is_admin',
        description='Schedule a new server onto hosts in maintenance with '
                    'the scheduler hint nova_ext:ignore_maintenance=true '
                    '(checked by the maintenance request filter in '
                    'nova-scheduler; the hint applies to that create only, '
                    'never to later moves of the server).',
        operations=[{'method': 'POST', 'path': '/servers'}],
        scope_types=['project']),
)

_registering = threading.Lock()


def list_rules():
    return list(RULES)


def _enforcer():
    nova_policy.init()
    enforcer = upstream.get('nova.policy._ENFORCER')
    with _registering:
        missing = [rule for rule in RULES
                   if rule.name not in enforcer.registered_rules]
        if missing:
            enforcer.register_defaults(missing)
    return enforcer


def authorize(ctxt, rule_name):
    """True when ``ctxt`` may do ``rule_name``; False when policy says no."""
    _enforcer()
    try:
        return bool(nova_policy.authorize(ctxt, rule_name))
    except exception.PolicyNotAuthorized:
        return False
