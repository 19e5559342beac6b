# SPDX-License-Identifier: Apache-2.0
"""What an operator sees when a nova-ext command fails.

:class:`OperatorError` is an input or environment problem the operator can
fix; ``nova-ext-manage`` prints its message as one line and exits 1. Any
other exception is a bug or an unforeseen state: the operator gets one line
naming a details file, which holds the traceback with secrets masked, never
a traceback on the terminal.
"""

import os
import re
import tempfile
import traceback

MASK = '***'

# scheme://user:PASSWORD@host in database and transport URLs.
_URL_PASSWORD = re.compile(r'(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)'
                           r'[^@\s]*(@)')
# password = value, admin_password: value, "password": "value" ...
_PASSWORD_OPTION = re.compile(
    r'''(\b[\w.-]*(?:password|passwd|secret|token)[\w.-]*["']?\s*[=:]\s*)'''
    r'''(["']?)[^\s"',}]+''', re.IGNORECASE)


class OperatorError(Exception):
    """A problem the operator can fix, said in one line."""

    def __str__(self):
        return one_line(super().__str__())


def one_line(text):
    return ' '.join(str(text).split())


def mask_secrets(text):
    """``text`` with URL passwords and password-like option values masked."""
    text = _URL_PASSWORD.sub(r'\1' + MASK + r'\2', text)
    return _PASSWORD_OPTION.sub(r'\1\2' + MASK, text)


def write_details(error):
    """Write ``error``'s traceback (masked) to a private file; its path."""
    fd, path = tempfile.mkstemp(prefix='nova-ext-manage-', suffix='.log')
    with os.fdopen(fd, 'w') as details:
        details.write(mask_secrets(''.join(traceback.format_exception(
            type(error), error, error.__traceback__))))
    return path
