# SPDX-License-Identifier: Apache-2.0
"""The one way nova-ext reads a YAML file an operator gives it (the
simulator's cluster and workload files, the sandbox's scenario): bounded
before and while it is parsed, each problem said in one line,
``FILE[:LINE]: what is wrong`` (:class:`YamlInputError`).

Bounds (doc/source/simulator.rst lists them):

* :data:`MAX_BYTES` -- a larger file is refused before it is parsed
  (PyYAML takes about a second and 10 MB of memory per megabyte);
* :data:`MAX_DEPTH` -- nesting deeper than this is refused while the
  document is composed (PyYAML composes recursively: a 5,000-deep list was
  a RecursionError);
* :data:`MAX_ALIASES` and :data:`MAX_NODES` -- at most this many ``*alias``
  references, and at most this many values once every alias is expanded:
  nine anchors of nine aliases each (a "billion laughs") are 81 aliases but
  a billion values to whoever walks or prints the result;
* the file must be UTF-8 text without NUL bytes, as YAML 1.1 requires;
* a number must be written as :mod:`nova_ext.numbers` reads one: YAML 1.1
  also reads ``010`` as 8, ``1_000``, ``0x10``, ``+3`` and ``1:30`` (90)
  as numbers, which nothing else nova-ext reads would.
"""

import yaml

from nova_ext import errors
from nova_ext import numbers

MAX_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 100
MAX_ALIASES = 1000
MAX_NODES = 1000000
# the largest integer a YAML input may hold (each reader has its own bound)
MAX_INTEGER = 10 ** 18


class YamlInputError(errors.OperatorError):
    """A YAML file nova-ext refuses; ``path``, ``line`` (or None) and
    ``problem`` are kept for callers with their own error type.
    """

    def __init__(self, path, line, problem):
        self.path = path
        self.line = line
        self.problem = problem
        where = '%s:%d' % (path, line) if line else path
        super().__init__('%s: %s' % (where, problem))


class BoundedSafeLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader counting depth and aliases as it composes."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _Refused(self.peek_event().start_mark,
                               'more than %d aliases (*name)' % MAX_ALIASES)
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(self.peek_event().start_mark,
                               'nested more than %d levels deep'
                               % MAX_DEPTH)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_int(loader, node):
    try:
        return numbers.parse_integer(node.value, -MAX_INTEGER, MAX_INTEGER)
    except ValueError as error:
        read_as = ''
        if len(node.value) <= 40:  # YAML's reading of a short one helps
            read_as = ', which YAML 1.1 reads as %d' % (
                yaml.SafeLoader.construct_yaml_int(loader, node))
        raise _Refused(node.start_mark, '%s%s: a number %s (quote it for a '
                       'string)' % (errors.echo(node.value), read_as, error))


BoundedSafeLoader.add_constructor('tag:yaml.org,2002:int', _construct_int)


class _Refused(Exception):
    def __init__(self, mark, problem):
        super().__init__(problem)
        self.mark = mark
        self.problem = problem


def _expanded_size(node, sizes):
    """How many values ``node`` stands for with every alias expanded; each
    distinct node is counted once (``sizes``: id -> size, None while being
    counted), so this is linear in the composed document, which holds each
    anchor once; its recursion is as deep as the document is nested.
    """
    if id(node) in sizes:
        if sizes[id(node)] is None:
            # an alias inside its own anchor (&a [*a]): endless
            raise _Refused(node.start_mark, 'an alias (*name) inside the '
                           'value it names')
        return sizes[id(node)]
    sizes[id(node)] = None
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(item, sizes) for item in node.value)
    elif isinstance(node, yaml.MappingNode):
        size += sum(_expanded_size(key, sizes) + _expanded_size(value, sizes)
                    for key, value in node.value)
    sizes[id(node)] = size
    return size


def read_text(path):
    """``path``'s text, refused (YamlInputError) when it cannot be read, is
    larger than :data:`MAX_BYTES`, binary or not UTF-8.
    """
    try:
        with open(path, 'rb') as stream:
            data = stream.read(MAX_BYTES + 1)
    except OSError as error:
        raise YamlInputError(path, None, 'cannot read: %s'
                             % (error.strerror or error))
    if len(data) > MAX_BYTES:
        raise YamlInputError(path, None, 'larger than %d bytes (%d MiB); '
                             'a YAML input is at most that'
                             % (MAX_BYTES, MAX_BYTES // (1024 * 1024)))
    if b'\0' in data:
        raise YamlInputError(path, None, 'binary file (NUL bytes), not YAML')
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as error:
        raise YamlInputError(path, data.count(b'\n', 0, error.start) + 1,
                             'not UTF-8 text (byte %d)' % error.start)


def load(path, loader_class=BoundedSafeLoader):
    """The single YAML document in ``path``, read with ``loader_class`` (a
    :class:`BoundedSafeLoader`, or a subclass building its own objects),
    within the bounds of this module. YamlInputError otherwise; what
    ``loader_class``'s constructors raise passes through.
    """
    text = read_text(path)
    loader = loader_class(text)
    loader.name = path
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, {}) > MAX_NODES:
            raise YamlInputError(path, None, 'more than %d values once its '
                                 'aliases are expanded' % MAX_NODES)
        return loader.construct_document(node)
    except _Refused as refused:
        raise YamlInputError(path, refused.mark.line + 1, refused.problem)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        raise YamlInputError(path, mark.line + 1 if mark else None,
                             'not valid YAML: %s' % (error.problem
                                                     or error.context))
    except yaml.YAMLError as error:
        raise YamlInputError(path, None, 'not valid YAML: %s' % error)
    finally:
        loader.dispose()
