# SPDX-License-Identifier: Apache-2.0
"""Start one real Nova service (or placement) in this process.

    python -m tests.system.launch nova-conductor --config-file nova.conf
    python -m tests.system.launch nova-api      (OS_NOVA_CONFIG_DIR, PORT)
    python -m tests.system.launch placement-api (OS_PLACEMENT_CONFIG_DIR, PORT)

Nova's own code runs unchanged: each service's ``main()``, Nova's WSGI
application under a threaded WSGI server. The only stand-ins are Nova's own
test fixtures for glance and neutron (image lookups answered from memory,
no ports: servers boot with ``networks='none'``), which nova-ext's system
tests do not exercise. Messaging is the machine's RabbitMQ, databases its
MariaDB.

The services run in Nova's eventlet mode (``OS_NOVA_DISABLE_EVENTLET_PATCHING
=0``), as Nova's own functional tests do: its test fixtures import eventlet,
which the default native-threading mode forbids.
"""

import os
import sys

# Monkey patching first, before anything imports socket or threading.
os.environ['OS_NOVA_DISABLE_EVENTLET_PATCHING'] = '0'
from nova import monkey_patch  # noqa: E402
monkey_patch.patch()

import socketserver  # noqa: E402
from wsgiref import simple_server  # noqa: E402

import fixtures  # noqa: E402


class _StandInHost(fixtures.Fixture):
    """What Nova's GlanceFixture/NeutronFixture expect of a test case."""

    def stub_out(self, old, new):
        self.useFixture(fixtures.MonkeyPatch(old, new))

    def flags(self, **kwargs):
        pass  # set in nova.conf instead (vif_plugging_timeout = 0)


class ThreadingWSGIServer(socketserver.ThreadingMixIn,
                          simple_server.WSGIServer):
    daemon_threads = True
    # bursts of parallel clients: at 128, a burst of 300 POSTs had
    # connections reset while the server was busy with the others
    request_queue_size = 1024


def serve(application):
    server = simple_server.make_server(
        '127.0.0.1', int(os.environ['PORT']), application,
        server_class=ThreadingWSGIServer)
    server.serve_forever()


def with_stand_ins():
    from nova.tests.fixtures import glance
    from nova.tests.fixtures import neutron
    host = _StandInHost()
    host.setUp()
    host.useFixture(glance.GlanceFixture(host))
    host.useFixture(neutron.NeutronFixture(host))


def main():
    service = sys.argv.pop(1)
    sys.argv[0] = service  # as the console script would be named
    # test-only modules a service must have imported (e.g. a virt driver,
    # which Nova loads from nova.virt only)
    for module in os.environ.get('NOVA_EXT_TEST_IMPORTS', '').split():
        __import__(module)
    if service == 'placement-api':
        from placement.wsgi import api
        return serve(api.application)
    if service == 'nova-api':
        with_stand_ins()
        from nova.wsgi import osapi_compute
        return serve(osapi_compute.application)
    if service in ('nova-conductor', 'nova-scheduler', 'nova-compute'):
        import importlib
        module = importlib.import_module(
            'nova.cmd.' + service.split('-', 1)[1])
        with_stand_ins()
        return module.main()
    sys.exit('unknown service %s' % service)


if __name__ == '__main__':
    main()
