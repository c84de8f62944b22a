"""The one builder of sessions: kept-alive connections, no retries.

``build`` makes a keystoneauth session (admin calls, and token requests that
go through a proxy); ``token_session`` makes the session a TokenClient sends
its token requests with: a ``DirectSession`` (urllib3, no requests layer)
when no proxy applies, else a keystoneauth one.

keystoneauth1, requests and urllib3 are imported when the first session is
built: the scenarios that use this module are loaded by Rally with every plugin.
"""

from __future__ import annotations

import json as jsonlib
import os
import urllib.parse
from collections.abc import Mapping
from typing import Any

from rally_keystone_bench.clients import wire
from rally_keystone_bench.clients.credentials import DEFAULTS, verify_of
from rally_keystone_bench.clients.wire import encode, user_agent  # noqa: F401  (the one builder)


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
    http.trust_env = False
    return ks_session.Session(
        auth=auth, session=http, verify=_ca_bundle(verify), cert=cert, user_agent=user_agent()
    )


def _ca_bundle(verify: bool | str) -> bool | str:
    """VERIFY, with True replaced by the environment's CA bundle, as requests reads it."""
    if verify is True:
        env = os.environ
        return env.get("REQUESTS_CA_BUNDLE") or env.get("CURL_CA_BUNDLE") or True
    return verify


def identity_v3_url(auth_url: str) -> str:
    """The Identity v3 root for an auth URL, without asking the server."""
    url = auth_url.rstrip("/")
    if url.endswith("/v3"):
        return url
    if url.endswith("/v2.0"):
        return url[: -len("/v2.0")] + "/v3"
    return url + "/v3"


def password_auth(credential: Mapping[str, Any]) -> Any:
    """keystoneauth's v3 password plugin for a credential (see clients.credentials)."""
    from keystoneauth1.identity import v3

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


class Response:
    """What TokenClient reads of an answer, as requests' Response names it."""

    __slots__ = ("status_code", "headers", "content", "reason")

    def __init__(self, status: int, headers: Any, content: bytes, reason: str) -> None:
        self.status_code = status
        self.headers = headers  # case-insensitive get() and []
        self.content = content
        self.reason = reason

    def json(self) -> Any:
        return jsonlib.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class DirectSession:
    """The part of keystoneauth's Session that TokenClient uses, straight over urllib3.

    About half the client CPU per token request of keystoneauth -> requests
    -> urllib3 (``benchmarks/client_cpu.py`` prints both;
    ``benchmarks/generator_ceiling.py`` what that does to the load a runner
    process can send). The same connection pools, TLS checks (CA
    file or directory, client certificate, ``verify=False``) and timeouts,
    without requests' per-request preparation (environment, cookies, hooks,
    redirects), which a token request does not use. Proxies are not
    handled here: ``token_session`` gives a keystoneauth session when one
    applies.

    ``request(url, method, headers=, params=, json=, timeout=, ...)`` takes
    the keystoneauth arguments TokenClient passes and ignores the rest;
    transport failures raise keystoneauth's ConnectFailure (ConnectTimeout
    for a timeout), the errors TokenClient turns into its own.
    """

    def __init__(
        self,
        url: str,
        *,
        verify: bool | str = True,
        cert: Any = None,
        pool_size: int = 1,
        pool_connections: int = 4,
        timeout: float | None = None,
    ) -> None:
        import urllib3

        tls: dict[str, Any] = {}
        if urllib.parse.urlsplit(url).scheme == "https":
            if verify is False:
                tls["cert_reqs"] = "CERT_NONE"
            else:
                # what requests does: a CA file or directory, else certifi's bundle
                if verify is True:
                    import certifi

                    verify = certifi.where()
                tls["cert_reqs"] = "CERT_REQUIRED"
                tls["ca_cert_dir" if os.path.isdir(verify) else "ca_certs"] = verify
            if cert:
                tls["cert_file"], tls["key_file"] = (
                    cert if isinstance(cert, tuple) else (cert, None)
                )
        self._urllib3 = urllib3
        self.pools = urllib3.PoolManager(
            num_pools=pool_connections, maxsize=max(pool_size, 1), retries=False, **tls
        )
        self.pools.pool_classes_by_scheme = wire.pool_classes()  # head and body in one send
        self.timeout = timeout

    def request(
        self,
        url: str,
        method: str,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        timeout: float | None = None,
        **_ignored: Any,
    ) -> Response:
        from keystoneauth1 import exceptions as ks_exc

        query, sent, body = encode(headers, params, json)
        if query:
            url += ("&" if "?" in url else "?") + query
        timeout = timeout if timeout is not None else self.timeout
        errors = self._urllib3.exceptions
        try:
            resp = self.pools.urlopen(
                method,
                url,
                body=body,
                headers=sent,
                redirect=False,
                retries=False,
                timeout=self._urllib3.Timeout(connect=timeout, read=timeout),
            )
        except (errors.ConnectTimeoutError, errors.ReadTimeoutError) as exc:
            raise ks_exc.ConnectTimeout(f"Request to {url} timed out: {exc}") from None
        except (errors.HTTPError, OSError) as exc:
            raise ks_exc.ConnectFailure(f"Unable to establish connection to {url}: {exc}") from None
        return Response(resp.status, resp.headers, resp.data, resp.reason or "")

    def close_connections(self) -> None:
        """Close every kept-alive connection (a fresh-connection client, after each request)."""
        self.pools.clear()


def token_session(
    url: str, *, verify: bool | str = True, cert: Any = None, pool_size: int = 1
) -> Any:
    """The session a TokenClient sends its token requests with.

    A DirectSession when no proxy applies to URL; through a proxy, a
    keystoneauth session (``build``), which knows how to use one.
    """
    import requests

    if requests.utils.get_environ_proxies(url):
        return build(url, verify=verify, cert=cert, pool_size=pool_size)
    return DirectSession(url, verify=_ca_bundle(verify), cert=cert, pool_size=pool_size)
