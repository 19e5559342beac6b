# SPDX-License-Identifier: Apache-2.0
"""Every command that reads nova.conf reads it one way
(``nova_ext.config_files``), issue 42: each console script, run as a real
process, over a table of bad config inputs, must exit non-zero with
exactly one error line, no traceback and no secret.
"""

import os
import shutil
import subprocess
import sys
import tempfile

import testtools

BIN = os.path.dirname(sys.executable)
SECRET = 'SuperLeak123'

# (console script, arguments after the config options)
ENTRY_POINTS = [
    ('nova-ext-status', ['upgrade', 'check']),
    ('nova-ext-manage', ['host', 'maintenance', 'list']),
    ('nova-ext-manage', ['quota', 'show', '--project', 'p1']),
    ('nova-ext-manage', ['explain', '--flavor', 'm1']),
]


class TestEveryCommandReadsConfigOneWay(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def path(self, name, content=None):
        path = os.path.join(self.dir, name)
        if content is not None:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'wb') as handle:
                handle.write(content)
        return path

    def cases(self):
        """(what, config arguments, what the error line must say)."""
        text_db = self.path('text.db', b'just some text, not SQLite\n')
        self.path('binary/nova.conf', b'[DEFAULT]\n\0\x01\x02')
        self.path('latin1/nova.conf', b'[DEFAULT]\nhost = caf\xe9\n')
        self.path('leak/10-secret.conf',
                  b'[DEFAULT]\npassword %s\n' % SECRET.encode())
        return [
            ('an abbreviation', ['--config-fil',
                                 self.path('missing.conf')],
             '--config-fil'),
            ('a missing file', ['--config-file', self.path('missing.conf')],
             'no such file'),
            ('a missing directory', ['--config-dir', self.path('nodir')],
             'no such'),
            ('a binary file in a dir', ['--config-dir', self.path('binary')],
             'binary file'),
            ('a latin-1 file in a dir', ['--config-dir',
                                         self.path('latin1')],
             'not UTF-8'),
            ('a secret in a bad line', ['--config-dir', self.path('leak')],
             '10-secret.conf:2:'),
            ('a sqlite URL naming a text file', ['--config-file', self.path(
                'sqlite.conf', b'[database]\nconnection = sqlite:///%s\n'
                b'[api_database]\nconnection = sqlite:///%s\n' % (
                    text_db.encode(), text_db.encode()))],
             'not an SQLite database'),
        ]

    def test_each_bad_input_is_one_line_from_each_command(self):
        for what, config, said in self.cases():
            for script, command in ENTRY_POINTS:
                argv = [os.path.join(BIN, script)] + config + command
                result = subprocess.run(argv, capture_output=True,
                                        text=True, timeout=180,
                                        cwd=self.dir)
                where = '%s %s: %s' % (script, ' '.join(command), what)
                self.assertNotEqual(0, result.returncode, where)
                output = result.stdout + result.stderr
                self.assertNotIn('Traceback', output, where)
                self.assertNotIn(SECRET, output, where)
                # argparse's refusal comes after its usage lines
                lines = [line for line in result.stderr.splitlines()
                         if not line.startswith(('usage:', ' '))]
                self.assertEqual(1, len(lines), '%s: %s' % (where, output))
                self.assertIn(said, lines[0], where)
