"""Admin credentials from wherever a user keeps them, parsed once, with one set of defaults.

Three sources: the usual ``OS_*`` variables, an openrc file of ``export
OS_...=`` lines (what ``keystone-bench keystone up`` writes), and a Rally env
spec file (JSON or YAML). Each gives the same credential mapping::

    auth_url, username, password, project_name, user_domain_name,
    project_domain_name, region_name, https_cacert, https_insecure
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from rally_keystone_bench.errors import BenchError, read_input

DEFAULTS = {
    "user_domain_name": "Default",
    "project_domain_name": "Default",
    "region_name": "RegionOne",
}
ENVIRON = "the environment (OS_* variables)"
_EXPORT_RE = re.compile(r"\s*(?:export\s+)?(OS_[A-Z_]+)=(.*)$")


def project_admin(auth_url: str, username: str, password: str, project: str) -> dict[str, str]:
    """The credential of a project admin in the Default domain (a local Keystone's, the mock's)."""
    return {
        "auth_url": auth_url,
        "username": username,
        "password": password,
        "project_name": project,
        "user_domain_name": DEFAULTS["user_domain_name"],
        "project_domain_name": DEFAULTS["project_domain_name"],
    }


def from_environ(env: Mapping[str, str], where: str = ENVIRON) -> dict[str, Any]:
    """The credential of OS_* variables; BenchError naming the ones missing from WHERE."""
    project = env.get("OS_PROJECT_NAME") or env.get("OS_TENANT_NAME")
    missing = [k for k in ("OS_AUTH_URL", "OS_USERNAME", "OS_PASSWORD") if not env.get(k)]
    missing += [] if project else ["OS_PROJECT_NAME"]
    if missing:
        raise BenchError(f"no admin credentials: {', '.join(missing)} not set in {where}")
    check_auth_url(env["OS_AUTH_URL"], "OS_AUTH_URL")
    return {
        "auth_url": env["OS_AUTH_URL"],
        "username": env["OS_USERNAME"],
        "password": env["OS_PASSWORD"],
        "project_name": project,
        "user_domain_name": env.get("OS_USER_DOMAIN_NAME") or DEFAULTS["user_domain_name"],
        "project_domain_name": env.get("OS_PROJECT_DOMAIN_NAME") or DEFAULTS["project_domain_name"],
        "region_name": env.get("OS_REGION_NAME") or DEFAULTS["region_name"],
        "https_cacert": env.get("OS_CACERT") or None,
        "https_insecure": env.get("OS_INSECURE", "").lower() in ("1", "true", "yes"),
    }


def os_variables(credential: Mapping[str, Any]) -> dict[str, str]:
    """The ``OS_*`` variables of CREDENTIAL, as an openrc exports them."""
    env = {
        "OS_AUTH_URL": str(credential["auth_url"]),
        "OS_USERNAME": str(credential["username"]),
        "OS_PASSWORD": str(credential["password"]),
        "OS_PROJECT_NAME": str(credential["project_name"]),
        "OS_USER_DOMAIN_NAME": str(credential.get("user_domain_name") or "Default"),
        "OS_PROJECT_DOMAIN_NAME": str(credential.get("project_domain_name") or "Default"),
    }
    if credential.get("region_name"):
        env["OS_REGION_NAME"] = str(credential["region_name"])
    env["OS_IDENTITY_API_VERSION"] = "3"
    return env


def openrc_text(credential: Mapping[str, Any]) -> str:
    """The openrc file of CREDENTIAL (``export OS_...=`` lines): what from_openrc reads."""
    return "".join(f"export {k}={v}\n" for k, v in os_variables(credential).items())


def from_openrc(path: Path) -> dict[str, Any]:
    """The credential of an openrc file's ``export OS_...=`` lines."""
    env: dict[str, str] = {}
    for line in read_input(path, "openrc").splitlines():
        m = _EXPORT_RE.match(line)
        if m:
            env[m.group(1)] = m.group(2).strip().strip("'\"")
    return from_environ(env, str(path))


def read_platform(path: str | Path) -> dict[str, Any]:
    """The openstack platform of a Rally env spec ({"openstack"} or {"existing@openstack"})."""
    path = Path(path)
    text = read_input(path, "env spec")
    try:
        spec = yaml.safe_load(text)  # JSON is YAML too
    except yaml.YAMLError:
        raise BenchError(f"env spec {path} is neither JSON nor YAML") from None
    platform = None
    if isinstance(spec, dict):
        platform = spec.get("openstack") or spec.get("existing@openstack")
    if not isinstance(platform, dict) or not platform.get("auth_url"):
        raise BenchError(f"env spec {path} has no openstack platform with an auth_url")
    check_auth_url(str(platform["auth_url"]), f"the auth_url of {path}")
    return platform


def check_auth_url(url: str, what: str) -> None:
    """BenchError when URL carries a user or password: Rally's and keystoneauth's
    logs print the auth URL as it is, so the password would reach them."""
    try:
        parts = urllib.parse.urlsplit(url)
        userinfo = parts.username is not None or parts.password is not None
    except ValueError:
        raise BenchError(f"{what} is not a URL") from None
    if userinfo:
        raise BenchError(
            f"{what} holds a user or password ({parts.scheme}://***@{parts.hostname}...): "
            "drop it from the URL; the password goes in OS_PASSWORD or the spec's admin"
        )


def from_spec_file(path: str | Path) -> dict[str, Any]:
    """The admin credential of a Rally env spec file."""
    platform = read_platform(path)
    if not isinstance(platform.get("admin"), dict):
        raise BenchError(f"{path}: no openstack admin in this env spec")
    cred = {**DEFAULTS, "https_cacert": None, "https_insecure": False}
    cred.update({k: platform[k] for k in ("auth_url", "region_name") if platform.get(k)})
    cred.update({k: platform[k] for k in ("https_cacert", "https_insecure") if k in platform})
    cred.update({k: v for k, v in platform["admin"].items() if v is not None})
    if "tenant_name" in cred and not cred.get("project_name"):
        cred["project_name"] = cred.pop("tenant_name")
    return cred


def verify_of(credential: Mapping[str, Any]) -> bool | str:
    """What keystoneauth's ``verify`` takes: False when insecure, else the CA file or True."""
    if credential.get("https_insecure"):
        return False
    return credential.get("https_cacert") or True
