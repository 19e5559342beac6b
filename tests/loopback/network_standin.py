# SPDX-License-Identifier: Apache-2.0
"""A stand-in for neutron-server in the loopback cloud: answers only the
calls Nova makes for servers booted with ``--nic none``.

Nova needs a ``network`` endpoint even when no server has a port: it looks
up security groups on server show/list, lists ports to clean up on delete,
reads the extension list, and checks the port quota for creates below
microversion 2.37. Every server of the loopback cloud is created with
``--nic none``, so the truthful answer to each of those is "nothing": empty
lists and unlimited quotas. Anything else is answered 404 and logged, so a
Nova call this stand-in does not know shows up in its log instead of being
answered wrongly. nova-ext's features and tests do not touch networking.

    python -m tests.loopback.network_standin PORT LOG_FILE
"""

import json
import re
import socketserver
import sys
import time
from wsgiref import simple_server

# collection -> key of its JSON list; all are empty with --nic none
EMPTY = {
    'ports': 'ports', 'networks': 'networks', 'subnets': 'subnets',
    'security-groups': 'security_groups', 'floatingips': 'floatingips',
    'extensions': 'extensions', 'trunks': 'trunks',
    'segments': 'segments', 'qos/policies': 'policies',
}
UNLIMITED = {name: -1 for name in (
    'network', 'subnet', 'port', 'router', 'floatingip', 'security_group',
    'security_group_rule')}


def application(environ, start_response):
    method = environ['REQUEST_METHOD']
    path = environ.get('PATH_INFO', '/').rstrip('/') or '/'
    path = re.sub(r'^/v2\.0', '', path) or '/'
    path = re.sub(r'\.json$', '', path)
    status, body = '200 OK', None
    if path == '/' and method == 'GET':
        # keystoneauth's version discovery on the catalog endpoint
        base = 'http://%s' % environ['HTTP_HOST']
        body = {'versions': [{'id': 'v2.0', 'status': 'CURRENT',
                              'links': [{'rel': 'self',
                                         'href': base + '/v2.0/'}]}]}
    elif method == 'GET' and path.lstrip('/') in EMPTY:
        body = {EMPTY[path.lstrip('/')]: []}
    elif method == 'GET' and re.match(r'^/quotas/[^/]+(/details)?$', path):
        body = {'quota': UNLIMITED}
    else:
        status, body = '404 Not Found', {'NeutronError': {
            'type': 'NotFound', 'detail': '',
            'message': 'the loopback stand-in answers only what Nova asks '
                       'for --nic none servers'}}
    data = json.dumps(body).encode()
    with open(LOG, 'a') as log:
        log.write('%s %s %s?%s -> %s\n' % (
            time.strftime('%H:%M:%S'), method, environ.get('PATH_INFO'),
            environ.get('QUERY_STRING', ''), status))
    start_response(status, [('Content-Type', 'application/json'),
                            ('Content-Length', str(len(data)))])
    return [data]


class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass  # the application logs every request itself


LOG = None

if __name__ == '__main__':
    LOG = sys.argv[2]
    simple_server.make_server('127.0.0.1', int(sys.argv[1]), application,
                              server_class=_Server,
                              handler_class=_QuietHandler).serve_forever()
