# SPDX-License-Identifier: Apache-2.0
"""A paste filter for the loopback nova-api, which has no keystone: a
request carrying ``X-Auth-Token: admin`` and no identity headers is the
cloud's administrator, as placement's ``noauth2`` takes that token.

So that openstacksdk and keystoneauth (``auth_type: admin_token`` in a
clouds.yaml), as an operator's tools use them, can drive the loopback cloud;
callers that send X-User-Id/X-Project-Id/X-Roles themselves are left alone.
"""

ADMIN = {'HTTP_X_USER_ID': 'admin', 'HTTP_X_PROJECT_ID': 'admin',
         'HTTP_X_ROLES': 'admin,member,reader'}


def filter_factory(global_conf, **local_conf):
    def wrap(app):
        def application(environ, start_response):
            if (environ.get('HTTP_X_AUTH_TOKEN') == 'admin'
                    and 'HTTP_X_USER_ID' not in environ):
                environ.update(ADMIN)
            return app(environ, start_response)
        return application
    return wrap
