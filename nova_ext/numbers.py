# SPDX-License-Identifier: Apache-2.0
"""Numbers as operators and users type them, parsed strictly: the one
parser for every number nova-ext reads from a person (extra specs, hints,
aggregate metadata, command-line options, YAML files).

Python's ``int()`` and ``float()`` accept ``' 3'``, ``'+3'``, ``'1_000'``
and digits of any script (``'３'``, ``'٣'``); ``float()`` also ``'nan'``,
``'inf'`` and ``'1e3'``. A value must mean the same thing to every reader,
so nova-ext accepts plain ASCII decimal only -- the grammar, whole::

    whole number    0|[1-9][0-9]*            (parse_whole_number)
    integer         0|-?[1-9][0-9]*          (parse_integer: a sign where
                                              a negative value means
                                              something, e.g. -1 unlimited)
    decimal number  (0|[1-9][0-9]*)('.'[0-9]+)?  (parse_decimal)

without '+', spaces, underscores, leading zeros or exponents, and refuses
magnitudes beyond a stated bound before converting. :func:`argument`
makes any of them an argparse ``type=``.
"""

import argparse
import re

from nova_ext import errors

# [0-9], not \d: \d matches the digits of every script.
WHOLE_NUMBER_PATTERN = '0|[1-9][0-9]*'
_WHOLE_NUMBER = re.compile(WHOLE_NUMBER_PATTERN)
INTEGER_PATTERN = '0|-?[1-9][0-9]*'
_INTEGER = re.compile(INTEGER_PATTERN)
DECIMAL_PATTERN = r'(?:0|[1-9][0-9]*)(?:\.[0-9]+)?'
_DECIMAL = re.compile(DECIMAL_PATTERN)
# digits after the point: more than a person types, fewer than a float holds
_MAX_FRACTION_DIGITS = 6

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


def parse_integer(text, minimum, maximum):
    """``text`` (grammar ``0|-?[1-9][0-9]*``) as an int in [minimum,
    maximum]; ValueError saying what is accepted otherwise.
    """
    if isinstance(text, bool):
        raise ValueError(_accepted(minimum, maximum))
    if isinstance(text, int):
        text = str(text)
    longest = max(len(str(minimum)), len(str(maximum)))
    if not isinstance(text, str) or len(text) > longest or (
            not _INTEGER.fullmatch(text)):
        raise ValueError(_accepted(minimum, maximum))
    value = int(text)
    if not minimum <= value <= maximum:
        raise ValueError(_accepted(minimum, maximum))
    return value


def parse_decimal(text, minimum, maximum):
    """``text`` (grammar ``(0|[1-9][0-9]*)(.[0-9]+)?``, at most 6 digits
    after the point) as a float in [minimum, maximum]; ValueError saying
    what is accepted otherwise.
    """
    if isinstance(text, bool) or not isinstance(text, str):
        raise ValueError(_accepted_decimal(minimum, maximum))
    whole, _, fraction = text.partition('.')
    if (len(whole) > len(str(int(maximum)))
            or len(fraction) > _MAX_FRACTION_DIGITS
            or not _DECIMAL.fullmatch(text)):
        raise ValueError(_accepted_decimal(minimum, maximum))
    value = float(text)
    if not minimum <= value <= maximum:
        raise ValueError(_accepted_decimal(minimum, maximum))
    return value


def argument(parse, minimum, maximum):
    """An argparse ``type=`` reading an option's value with ``parse`` (one
    of this module's parsers): argparse then says ``argument --x: 'VALUE'
    must be ...``, the value cut as every echo is.
    """
    def parse_argument(text):
        try:
            return parse(text, minimum, maximum)
        except ValueError as error:
            raise argparse.ArgumentTypeError('%s %s' % (
                errors.echo(text), error))

    parse_argument.__name__ = parse.__name__.replace('parse_', '')
    parse_argument.bounds = (parse, minimum, maximum)
    return parse_argument


def _accepted(minimum, maximum):
    if minimum < 0:
        return ('must be a whole number from %d to %d in plain decimal '
                'digits (a leading - for a negative one)' % (
                    minimum, maximum))
    return 'must be a whole number from %d to %d in plain decimal digits' % (
        minimum, maximum)


def _accepted_decimal(minimum, maximum):
    return ('must be a number from %s to %s in plain decimal digits, with '
            'at most %d after the point' % (minimum, maximum,
                                            _MAX_FRACTION_DIGITS))
