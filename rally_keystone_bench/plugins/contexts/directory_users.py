"""The env's directory users: the LDAP users a local directory made, read from its file.

keystone-bench's local directory writes them (mode 0600) and names the file
in the Rally env's ``!extras``; keystone_users reads them when the load's
users live in LDAP.
"""

from __future__ import annotations

import json

from rally import exceptions


def directory_users_path(env: dict) -> str | None:
    """The env's directory users file: !extras {keystone_bench: {directory_users: FILE}}."""
    extras = (env or {}).get("extras") or {}
    return ((extras.get("keystone_bench") or {}).get("directory_users")) or None


def load_directory_users(env: dict, domain: str) -> list[dict]:
    """[{"name", "password"}] of DOMAIN from the env's directory users file.

    The file (mode 0600, written by keystone-bench's local directory) is JSON:
    {"domain": NAME, "users": [{"name": ..., "password": ...}, ...]}.
    """
    path = directory_users_path(env)
    if not path:
        raise exceptions.ContextSetupFailure(
            ctx_name="keystone_users", msg="the env names no directory users file"
        )
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        raise exceptions.ContextSetupFailure(
            ctx_name="keystone_users", msg=f"cannot read the directory users {path}: {exc}"
        ) from None
    if doc.get("domain") != domain:
        raise exceptions.ContextSetupFailure(
            ctx_name="keystone_users",
            msg=f"the directory users in {path} are of domain {doc.get('domain')!r}, "
            f"not {domain!r}",
        )
    return list(doc.get("users") or [])
