"""The one builder of keystoneauth sessions: kept-alive connections, no retries.

keystoneauth1 and requests are imported when the first session is built:
the scenarios that use this module are loaded by Rally with every plugin.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from rally_keystone_bench.clients.credentials import DEFAULTS, verify_of


def build(
    url: str,
    *,
    verify: bool | str = True,
    cert: Any = None,
    auth: Any = None,
    pool_size: int = 1,
    pool_connections: int = 4,
) -> Any:
    """A keystoneauth1 Session for URL's host: POOL_SIZE kept-alive connections, no retries.

    requests reads the environment (proxies, no_proxy, ~/.netrc, CA bundle)
    again for every request, inside the timer: 50-100 us of client CPU per
    token request. It is read once, here, instead.
    """
    import requests
    from keystoneauth1 import session as ks_session

    http = requests.Session()
    adapter = requests.adapters.HTTPAdapter(
        pool_connections=pool_connections, pool_maxsize=max(pool_size, 1), max_retries=0
    )
    http.mount("http://", adapter)
    http.mount("https://", adapter)
    http.proxies = requests.utils.get_environ_proxies(url)
    if verify is True:
        env = os.environ
        verify = env.get("REQUESTS_CA_BUNDLE") or env.get("CURL_CA_BUNDLE") or True
    http.trust_env = False
    return ks_session.Session(auth=auth, session=http, verify=verify, cert=cert)


def password_auth(credential: Mapping[str, Any]) -> Any:
    """keystoneauth's v3 password plugin for a credential (see clients.credentials)."""
    from keystoneauth1.identity import v3

    from rally_keystone_bench.clients.tokens import identity_v3_url

    return v3.Password(
        auth_url=identity_v3_url(credential["auth_url"]),
        username=credential.get("username"),
        password=credential.get("password"),
        project_name=credential.get("tenant_name") or credential.get("project_name"),
        user_domain_name=credential.get("user_domain_name") or DEFAULTS["user_domain_name"],
        project_domain_name=credential.get("project_domain_name")
        or DEFAULTS["project_domain_name"],
    )


def admin_session(credential: Mapping[str, Any], pool_size: int = 1) -> Any:
    """A session that authenticates as CREDENTIAL by password when it first needs a token."""
    return build(
        credential["auth_url"],
        verify=verify_of(credential),
        auth=password_auth(credential),
        pool_size=pool_size,
        pool_connections=2,
    )
