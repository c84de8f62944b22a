"""Before any load on an existing cloud: is it a Keystone, and does the admin get in?

Rally's ``env check`` says only "failed ... :-(" for a wrong password or a web
page at the auth URL; these checks say which, in one line:
``admin authentication: HTTP 401`` or ``not a Keystone: got text/html``.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from rally_keystone_bench.boundary import mask_urls
from rally_keystone_bench.clients import check
from rally_keystone_bench.clients.auth import UserAuth
from rally_keystone_bench.errors import BenchError

TIMEOUT = 10.0


def _context(platform: Mapping[str, Any]) -> ssl.SSLContext | None:
    if platform.get("https_insecure"):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    if platform.get("https_cacert"):
        return ssl.create_default_context(cafile=platform["https_cacert"])
    return None


def _admin_auth(admin: Mapping[str, Any]) -> tuple[UserAuth, str | None]:
    """The admin of a Rally env spec, by name in its domain; its project scope, if any."""
    auth = UserAuth(
        username=admin.get("username"),
        password=admin.get("password"),
        user_domain_name=admin.get("user_domain_name") or "Default",
        project_name=admin.get("project_name") or admin.get("tenant_name"),
        project_domain_name=admin.get("project_domain_name") or "Default",
    )
    return auth, "project" if auth.project_name else None


def check_keystone(platform: Mapping[str, Any]) -> None:
    """BenchError unless PLATFORM's auth URL answers JSON and its admin gets a token.

    PLATFORM is a Rally env spec's ``openstack`` mapping (auth_url, admin, TLS).
    """
    url = str(platform["auth_url"]).rstrip("/")
    ctx = _context(platform)
    shown = mask_urls(url)
    try:
        req = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=TIMEOUT, context=ctx) as resp:
            kind = resp.headers.get_content_type()
            body = resp.read(65536)
    except urllib.error.HTTPError as exc:
        kind, body = exc.headers.get_content_type(), exc.read(65536)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise BenchError(f"auth URL {shown} is unreachable: {reason}") from None
    if kind != "application/json" or not _is_json(body):
        raise BenchError(f"auth URL {shown} is not a Keystone: got {kind}, not JSON")
    admin = platform.get("admin") or {}
    try:
        status = check.token_status(url, *_admin_auth(admin), timeout=TIMEOUT, context=ctx)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise BenchError(f"admin authentication at {shown}: {reason}") from None
    if status != 201:
        hint = " (check OS_USERNAME, OS_PASSWORD and their domains)" if status == 401 else ""
        raise BenchError(
            f"admin authentication: HTTP {status} from {shown} as {admin.get('username')!r}{hint}"
        )


def _is_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return False
    return True
