"""Reuse tags: where their users' passwords are kept, and how a tag is deleted.

A run with keystone_users' ``reuse: TAG`` keeps its projects and users, named
``rkb-reuse-TAG-p00``, ``rkb-reuse-TAG-p00-u0000``... and marked by the first
word of their description, ``rkb-reuse:TAG``. The users' passwords are kept
in a state file readable by its owner only (0600), never in a log or report:
``$KEYSTONE_BENCH_REUSE_DIR`` or ``~/.cache/rally-keystone-bench/reuse``,
one file per tag and Keystone. token_pool's ``reuse: TAG`` keeps its pooled
tokens beside it (``TAG-<hash>.tokens.json``, 0600 as well), so the next run
issues only the ones missing or near expiry. ``keystone-bench cleanup --reuse
TAG`` deletes every project and user carrying the tag's name prefix *and*
marker, then both files (``forget``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rally_keystone_bench import writer

TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$"


def check_tag(tag: str) -> str:
    if not re.match(TAG_PATTERN, tag or ""):
        from rally_keystone_bench.errors import BenchError

        raise BenchError(
            f"reuse tag {tag!r} must be 1-32 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    return tag


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the state files are, for a process with ENVIRON (default: this one's)."""
    env = os.environ if environ is None else environ
    root = env.get("KEYSTONE_BENCH_REUSE_DIR")
    if root:
        return Path(root)
    home = env.get("HOME") if environ is not None else None
    cache = env.get("XDG_CACHE_HOME") or str(Path(home or Path.home()) / ".cache")
    return Path(cache) / "rally-keystone-bench" / "reuse"


def state_path(tag: str, auth_url: str, environ: Mapping[str, str] | None = None) -> Path:
    """One state file per tag and per Keystone (the auth URL's hash)."""
    digest = hashlib.sha256(auth_url.rstrip("/").encode()).hexdigest()[:10]
    return state_dir(environ) / f"{tag}-{digest}.json"


def tokens_path(tag: str, auth_url: str, environ: Mapping[str, str] | None = None) -> Path:
    """The tag's pooled tokens (token_pool's reuse), beside its state file."""
    return state_path(tag, auth_url, environ).with_suffix(".tokens.json")


def load_state(tag: str, auth_url: str) -> dict[str, Any]:
    """{"tag", "auth_url", "users": {user_id: {"name", "password"}}}; empty when none."""
    empty = {"tag": tag, "auth_url": auth_url, "users": {}}
    data = _read(state_path(tag, auth_url))
    return data if data is not None else empty


def save_state(state: dict[str, Any]) -> Path:
    """Write the state file atomically, mode 0600 from its first byte."""
    return _write_private(state_path(state["tag"], state["auth_url"]), state)


def load_tokens(tag: str, auth_url: str) -> dict[str, Any]:
    """{"tag", "auth_url", "users": {user_id: {"scope", "project_id", "tokens":
    [{"value", "expires_at"}, ...]}}}: the pooled tokens kept; empty when none."""
    empty = {"tag": tag, "auth_url": auth_url, "users": {}}
    data = _read(tokens_path(tag, auth_url))
    return data if data is not None else empty


def save_tokens(kept: dict[str, Any]) -> Path:
    """Write the kept tokens atomically, mode 0600 from the first byte, as the state."""
    return _write_private(tokens_path(kept["tag"], kept["auth_url"]), kept)


def forget(tag: str, auth_url: str, environ: Mapping[str, str] | None = None) -> list[Path]:
    """Delete the tag's state file (its users' passwords) and its kept tokens.

    ENVIRON: the environment of the process that wrote them (a Rally home's,
    whose HOME differs from ours); returns the files deleted.
    """
    gone = []
    for path in (state_path(tag, auth_url, environ), tokens_path(tag, auth_url, environ)):
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        gone.append(path)
    return gone


def _read(path: Path) -> dict[str, Any] | None:
    """A state file's contents, or None when it is missing, unreadable or malformed."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("users"), dict):
        return None
    return data


def _write_private(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return writer.write_json(path, data, indent=1, newline=False, private=True, sort_keys=True)


def delete_tag(admin: Any, tag: str, workers: int = 20) -> tuple[int, int]:
    """Delete the tag's users, then its projects; returns (projects, users) deleted.

    Only resources whose name starts with the tag's prefix and whose
    description carries its marker are touched, in every domain.
    """
    from rally_keystone_bench.clients import admin as _admin
    from rally_keystone_bench.plugins.contexts import _base

    prefix = _base.reuse_prefix(tag)
    counts = []
    for kind in ("users", "projects"):
        owned = [r for r in admin.list_prefixed(kind, prefix) if _base.owned_by_tag(r, tag)]

        def delete(record: dict, kind: str = kind) -> bool:
            return admin.delete(kind, record["id"])

        done, errors, _ = _admin.run_parallel(delete, owned, workers, fail_fast=False)
        if errors:
            raise errors[0]
        # A 404 on a retried delete means an earlier attempt did delete it.
        counts.append(len(done))
    return counts[1], counts[0]
