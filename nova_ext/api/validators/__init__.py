# SPDX-License-Identifier: Apache-2.0
"""Flavor extra-spec validators, loaded by nova-api through the
``nova.api.extra_spec_validators`` entry-point namespace.

Registering any ``nova_ext:`` validator makes Nova treat ``nova_ext`` as a
known namespace: from microversion 2.86 an unknown ``nova_ext:`` key or a bad
value is refused with HTTP 400.
"""

import dataclasses

from nova.api.validation.extra_specs import base
from nova import exception

from nova_ext import numbers


@dataclasses.dataclass
class NamedExtraSpecValidator(base.ExtraSpecValidator):
    """Nova's validator, with error messages that name the extra spec and
    say what it accepts (Nova's own name only the bad value).
    """

    def validate(self, name, value):
        parser = self.value.get('parser')
        if parser is not None:
            # a grammar Nova's pattern cannot say with a useful message:
            # the parser's ValueError names the key and the allowed form
            try:
                parser(value)
            except ValueError as error:
                raise exception.ValidationError(
                    "Validation failed for extra spec '%s': %s"
                    % (name, error))
        if self.value['type'] is int:
            # Nova's check is int(), which takes '+3', '1_000', ' 3' and
            # digits of any script; readers of the spec parse strictly.
            try:
                numbers.parse_whole_number(
                    value, self.value.get('min', 0),
                    self.value.get('max', numbers.DEFAULT_MAXIMUM))
            except ValueError:
                raise exception.ValidationError(
                    "Validation failed for extra spec '%s': %r is not "
                    "accepted. Allowed: %s" % (name, value, self.allowed()))
        try:
            super().validate(name, value)
        except exception.ValidationError as error:
            detail = str(error).replace('Validation failed; ', '')
            if 'enum' not in self.value:  # Nova's message lists the enum
                detail += ' Allowed: ' + self.allowed()
            raise exception.ValidationError(
                "Validation failed for extra spec '%s': %s" % (name, detail))

    def allowed(self):
        spec = self.value
        if spec['type'] is int:
            low, high = spec.get('min'), spec.get('max')
            return 'a whole number from %s to %s in plain decimal digits.' % (
                low or 0, numbers.DEFAULT_MAXIMUM if high is None else high)
        if spec['type'] is bool:
            return 'true or false.'
        if 'pattern' in spec and len(spec['pattern']) <= 40:
            return "a string matching '%s'." % spec['pattern']
        return self.description
