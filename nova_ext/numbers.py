# SPDX-License-Identifier: Apache-2.0
"""Whole numbers as operators and users type them, parsed strictly.

Python's ``int()`` accepts ``' 3'``, ``'+3'``, ``'1_000'`` and digits of
any script (``'３'``); a flavor extra spec, scheduler hint or aggregate key
that Nova stores as a string must mean the same thing to every reader, so
nova-ext accepts plain ASCII decimal only, without sign, spaces or leading
zeros, and refuses magnitudes beyond a stated bound before converting.
"""

import re

# [0-9], not \d: \d matches the digits of every script.
WHOLE_NUMBER_PATTERN = '0|[1-9][0-9]*'
_WHOLE_NUMBER = re.compile(WHOLE_NUMBER_PATTERN)

# Nothing nova-ext counts (group members per domain, domains, skew) comes
# near this; it keeps absurd inputs from becoming huge integers.
DEFAULT_MAXIMUM = 1000000


def parse_whole_number(text, minimum=0, maximum=DEFAULT_MAXIMUM):
    """``text`` as an int in [minimum, maximum]; ValueError saying what is
    accepted otherwise. Non-strings (a hint sent as JSON number) are taken
    by their decimal text, so ``2`` and ``'2'`` agree and ``2.0`` does not.
    """
    if isinstance(text, bool):
        raise ValueError(_accepted(minimum, maximum))
    if isinstance(text, int):
        text = str(text)
    if not isinstance(text, str) or len(text) > len(str(maximum)) or (
            not _WHOLE_NUMBER.fullmatch(text)):
        raise ValueError(_accepted(minimum, maximum))
    value = int(text)
    if not minimum <= value <= maximum:
        raise ValueError(_accepted(minimum, maximum))
    return value


def _accepted(minimum, maximum):
    return 'must be a whole number from %d to %d in plain decimal digits' % (
        minimum, maximum)
