# SPDX-License-Identifier: Apache-2.0
"""Strict numbers: what a hint, extra spec, aggregate key, command-line
option or YAML file accepts, read by nova_ext.numbers only.
"""

import argparse
import ast
import io
import pathlib

import fixtures
import hypothesis
from hypothesis import strategies
from nova import test
import testtools

from nova_ext.cmd import manage
from nova_ext.cmd import sandbox
from nova_ext import numbers
from nova_ext.quota import commands as quota_commands


class ParseWholeNumberTest(testtools.TestCase):

    def test_plain_decimal_is_accepted(self):
        self.assertEqual(0, numbers.parse_whole_number('0'))
        self.assertEqual(42, numbers.parse_whole_number('42'))
        self.assertEqual(3, numbers.parse_whole_number(3))

    def test_what_int_accepts_but_a_person_did_not_mean_is_refused(self):
        for text in ('1_000', '+3', '-1', ' 3', '3 ', '03', '\uff13',
                     '\u0663', '3.0', '', '0x10', '1e3', True, 2.0, None,
                     ['2']):
            self.assertRaises(ValueError, numbers.parse_whole_number, text)

    def test_bounds_are_checked_before_converting(self):
        self.assertRaises(ValueError, numbers.parse_whole_number, '9' * 5000)
        self.assertRaises(ValueError, numbers.parse_whole_number, '0',
                          minimum=1)
        self.assertRaises(ValueError, numbers.parse_whole_number, '11',
                          maximum=10)
        self.assertEqual(10, numbers.parse_whole_number('10', maximum=10))

    def test_the_message_says_what_is_accepted(self):
        error = self.assertRaises(ValueError, numbers.parse_whole_number,
                                  '1_0', 1, 64)
        self.assertEqual('must be a whole number from 1 to 64 in plain '
                         'decimal digits', str(error))


# -- the grammar, said without a regular expression: the reference ----------

DIGITS = '0123456789'


def is_whole_number(text):
    """``0|[1-9][0-9]*``: ASCII digits, no leading zero."""
    return (text != '' and all(char in DIGITS for char in text)
            and (text == '0' or text[0] != '0'))


def is_integer(text):
    """A whole number, or '-' and a whole number other than 0."""
    if text.startswith('-'):
        return is_whole_number(text[1:]) and text != '-0'
    return is_whole_number(text)


def is_decimal(text):
    """A whole number, then optionally '.' and at least one digit."""
    whole, point, fraction = text.partition('.')
    return is_whole_number(whole) and (not point or (
        fraction != '' and all(char in DIGITS for char in fraction)))


# what int() and float() take that a person typing a number did not mean,
# mixed with what makes a number
NUMBER_LIKE = strategies.text(
    alphabet='0123456789-+_. eE\t\n\u0663\uff13\u00b2x', max_size=9)
ANY_TEXT = strategies.one_of(NUMBER_LIKE, strategies.text(max_size=9))


class GrammarPropertyTest(testtools.TestCase):
    """Each parser accepts a string iff it is in the documented grammar
    (and in range); anything else is a ValueError, never another value.
    """

    @hypothesis.settings(max_examples=3000, deadline=None)
    @hypothesis.given(ANY_TEXT)
    def test_whole_number(self, text):
        expected = is_whole_number(text) and int(text) <= 10 ** 6
        try:
            value = numbers.parse_whole_number(text, 0, 10 ** 6)
        except ValueError:
            self.assertFalse(expected, text)
        else:
            self.assertTrue(expected, text)
            self.assertEqual(int(text), value)

    @hypothesis.settings(max_examples=3000, deadline=None)
    @hypothesis.given(ANY_TEXT)
    def test_integer(self, text):
        expected = is_integer(text) and -1 <= int(text) <= 10 ** 6
        try:
            value = numbers.parse_integer(text, -1, 10 ** 6)
        except ValueError:
            self.assertFalse(expected, text)
        else:
            self.assertTrue(expected, text)
            self.assertEqual(int(text), value)

    @hypothesis.settings(max_examples=3000, deadline=None)
    @hypothesis.given(ANY_TEXT)
    def test_decimal(self, text):
        expected = (is_decimal(text) and len(text.partition('.')[2]) <= 6
                    and float(text) <= 10 ** 6)
        try:
            value = numbers.parse_decimal(text, 0, 10 ** 6)
        except ValueError:
            self.assertFalse(expected, text)
        else:
            self.assertTrue(expected, text)
            self.assertEqual(float(text), value)

    def test_what_python_takes_and_the_grammar_refuses(self):
        for text in ('\u0663', '1_000', ' 12 ', '+3', '-0', '１２', 'nan',
                     'inf', '1e3', '.5', '5.', '0x10', '012'):
            for parse in (numbers.parse_whole_number, numbers.parse_integer,
                          numbers.parse_decimal):
                self.assertRaises(ValueError, parse, text, -1, 10 ** 6)


# -- every number an operator types goes through numbers --------------------

PACKAGE = pathlib.Path(numbers.__file__).resolve().parent

# int()/float() calls in nova_ext that do not read what a person typed,
# each with why; any other is a number read around nova_ext.numbers.
NOT_OPERATOR_TEXT = {
    ('cmd/sandbox.py', 'int(size * scale)'): 'arithmetic',
    ('maintenance/audit.py', "int(rules.get('max_server_per_host', 1))"):
        "a server group's rule, validated and stored by Nova's API",
    ('maintenance/execute.py', 'int(self.clock() - self._begun)'):
        'a duration',
    ('maintenance/execute.py', 'int(self.clock() - run.started)'):
        'a duration',
    ('numbers.py', 'int(text)'): 'after the grammar matched',
    ('numbers.py', 'float(text)'): 'after the grammar matched',
    ('numbers.py', 'int(maximum)'): "the caller's bound",
    ('quota/db.py', 'int(next(values) or 0)'): 'a database sum',
    ('scheduler/group_turns.py', 'int(deadline - time.monotonic())'):
        'a duration',
    ('scheduler/weights/__init__.py',
     'float(values.max() if maxval is None else maxval)'):
        "weighers' numbers",
    ('scheduler/weights/__init__.py',
     'float(values.min() if minval is None else minval)'):
        "weighers' numbers",
    ('scheduler/weights/bin_packing.py', 'float(configured.get(r, 0.0))'):
        'an oslo.config option, already typed by oslo.config',
    ('simulator/cloud.py', 'int(value)'):
        "placement's query string, written by Nova",
    ('simulator/cloud.py', 'int(amount)'):
        "placement's query string, written by Nova",
    ('simulator/engine.py', 'int(0.95 * len(times_ms))'): 'arithmetic',
    ('simulator/model.py', 'int(group.vcpus * group.cpu_allocation_ratio)'):
        'arithmetic',
    ('simulator/model.py', 'int((group.ram_mb - group.reserved_ram_mb) * '
                           'group.ram_allocation_ratio)'): 'arithmetic',
    ('simulator/model.py', 'int((group.disk_gb - group.reserved_disk_gb) * '
                           'group.disk_allocation_ratio)'): 'arithmetic',
    ('simulator/model.py', 'float(value)'):
        'a YAML integer (already read by yaml_input) widened to a float',
    ('simulator/model.py', 'int(rng.expovariate(1.0 / lifetime))'):
        'arithmetic',
    ('simulator/report.py', 'int(self.WIDTH * done / max(1, self.total))'):
        'arithmetic',
    ('simulator/spread.py', 'int(total)'): 'arithmetic',
    ('upstream.py', "int(version.version_string().split('.')[0])"):
        "Nova's installed version",
}


def number_reads(source):
    """(source of each int()/float() call, each type=int/float keyword)."""
    calls, types = [], []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Name) and node.func.id in (
                'int', 'float'):
            calls.append(ast.unparse(node))
        for keyword in node.keywords:
            if keyword.arg == 'type' and isinstance(
                    keyword.value, ast.Name) and keyword.value.id in (
                        'int', 'float'):
                types.append(ast.unparse(node)[:60])
    return calls, types


class EveryNumberReadTest(testtools.TestCase):

    def test_no_number_is_read_around_numbers(self):
        found, typed = set(), []
        for path in sorted(PACKAGE.rglob('*.py')):
            relative = path.relative_to(PACKAGE).as_posix()
            if relative.startswith('tempest/'):
                continue  # tempest's plugin reads tempest.conf's options
            calls, types = number_reads(path.read_text())
            found.update((relative, call) for call in calls)
            typed += ['%s: %s' % (relative, text) for text in types]
        self.assertEqual([], typed, 'argparse type=int/float: use '
                         'numbers.argument')
        self.assertEqual(set(), found - set(NOT_OPERATOR_TEXT),
                         'int()/float() on what may be operator text: '
                         'read it with nova_ext.numbers')

    def test_the_scan_sees_what_it_forbids(self):
        calls, types = number_reads(
            "p.add_argument('--n', type=int)\nx = int(args.value)\n")
        self.assertEqual(['int(args.value)'], calls)
        self.assertEqual(1, len(types))


def number_options(parser, path=()):
    """(command path, option, its type) of every option of ``parser`` and
    its sub-commands that has a type.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from number_options(sub, path + (name,))
        elif action.type is not None:
            yield path, action.option_strings[0], action.type


class CommandLineNumbersTest(test.NoDBTestCase):
    """Every option of nova-ext-manage that takes a number, as argparse
    calls its type. (Nova's test case: should a value pass, manage.main
    goes on to parse the global CONF, which Nova's fixture resets.)
    """

    def test_every_number_option_reads_with_numbers(self):
        options = list(number_options(manage.build_parser()))
        names = {(' '.join(path), option) for path, option, _ in options}
        # the and the maintenance budgets at least
        for expected in (('quota set', '--instances'),
                         ('quota set', '--cores'), ('quota set', '--ram'),
                         ('host drain', '--parallel'),
                         ('host drain', '--timeout'),
                         ('host drain',
                          '--max-unavailable-per-group'),
                         ('simulate', '--seed'), ('explain', '--num')):
            self.assertIn(expected, names)
        for path, option, parse in options:
            where = '%s %s' % (' '.join(path), option)
            self.assertTrue(hasattr(parse, 'bounds'), where)
            for text in ('\u0663', '1_000', ' 12 ', '12 ', '+3', '１２',
                         'nan', '1e3', '0x10', '012', '', 'x' * 5000):
                error = self.assertRaises(argparse.ArgumentTypeError, parse,
                                          text)
                self.assertIn('plain decimal digits', str(error), where)
                self.assertLess(len(str(error)), 400, where)
            self.assertEqual(12, parse('12'), where)

    def test_quota_set_refuses_an_arabic_indic_three(self):
        err = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        for value in ('\u0663', '1_000', ' 12 '):
            error = self.assertRaises(SystemExit, manage.main, [
                'quota', 'set', '--project', 'p1', '--flavor', 'f',
                '--instances', value])
            self.assertEqual(2, error.code)
        self.assertIn("argument --instances: '\u0663' must be a whole "
                      "number from -1 to 2147483647", err.getvalue())
        self.assertEqual(quota_commands.MAX_LIMIT,
                         manage.QUOTA_LIMIT.bounds[2])
        self.assertEqual(-1, numbers.parse_integer(
            '-1', *manage.QUOTA_LIMIT.bounds[1:]))

    def test_sandbox_options_read_with_numbers(self):
        err = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        for option in ('--hosts', '--keep-serving'):
            for value in ('\u0663', '1_000', ' 12 '):
                error = self.assertRaises(SystemExit, sandbox.parse_args,
                                          [option, value])
                self.assertEqual(2, error.code)
            self.assertEqual(12, getattr(sandbox.parse_args(
                [option, '12']), option[2:].replace('-', '_')))
