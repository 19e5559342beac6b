# SPDX-License-Identifier: Apache-2.0
"""Serve one OpenStack WSGI application under gunicorn.

    python -m tests.loopback.serve NAME PORT package.module:application

Keystone, glance and Nova parse ``sys.argv`` as their own command line when
their application module is imported, so gunicorn's options cannot be on
the command line: they are set here, and the worker imports the
application with ``sys.argv`` reduced to the service's name. An import that
fails (or exits) stops gunicorn instead of letting it boot worker after
worker.
"""

import sys

from gunicorn.app import base
from gunicorn import util


class Server(base.BaseApplication):

    def __init__(self, name, port, app):
        self.name, self.port, self.app = name, port, app
        super().__init__()

    def load_config(self):
        for key, value in {
                'bind': '127.0.0.1:%d' % self.port,
                # one process with threads: what DevStack's uWSGI runs
                # per service, at a fraction of the memory of several
                'workers': 1, 'threads': 4,
                'timeout': 300, 'graceful_timeout': 5,
                # longer than any client's polling interval: with gunicorn's
                # 2 s, "server delete --wait" (openstacksdk polls every 2 s)
                # sometimes sent its GET on a connection the server was
                # closing, and failed with "connection reset by peer"
                'keepalive': 30,
                'accesslog': '-', 'proc_name': self.name,
                # gunicorn's default control socket is one path in $HOME
                # for every gunicorn: the services would fight over it
                'control_socket_disable': True}.items():
            self.cfg.set(key, value)

    def load(self):
        sys.argv = [self.name]
        try:
            return util.import_app(self.app)
        except SystemExit as error:
            raise RuntimeError('%s exited while loading: %s' % (
                self.app, error))


if __name__ == '__main__':
    Server(sys.argv[1], int(sys.argv[2]), sys.argv[3]).run()
