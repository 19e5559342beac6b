"""Flavor extra-spec validators, loaded by nova-api through the
``nova.api.extra_spec_validators`` entry-point namespace.

Registering any ``nova_ext:`` validator makes Nova treat ``nova_ext`` as a
known namespace: from microversion 2.86 an unknown ``nova_ext:`` key or a bad
value is refused with HTTP 400.
"""

import dataclasses

from nova.api.validation.extra_specs import base
from nova import exception


@dataclasses.dataclass
class NamedExtraSpecValidator(base.ExtraSpecValidator):
    """Nova's validator, with error messages that name the extra spec and
    say what it accepts (Nova's own name only the bad value).
    """

    def validate(self, name, value):
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
            if high is None:
                return 'a whole number of %s or more.' % low
            return 'a whole number from %s to %s.' % (low, high)
        if spec['type'] is bool:
            return 'true or false.'
        if 'pattern' in spec and len(spec['pattern']) <= 40:
            return "a string matching '%s'." % spec['pattern']
        return self.description
