"""Keystone 30.0.0 trees with known changes, for the gate's functional tests.

Built once from the release's sdist (pip download --no-binary, by
benchmarks/gate_noise.py) into the cache directory, so their Keystone
environments are cached too.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from rally_keystone_bench.deploy import venv

# One more SQL statement (and its transaction's BEGIN) in every validate_token call.
EXTRA_SQL_PATCH = (
    "        from keystone.common import sql as _counters_sql  # counters test: one more query\n"
    "        with _counters_sql.session_for_read() as _counters_session:\n"
    "            _counters_session.execute(\n"
    "                _counters_sql.sql.text('SELECT count(*) FROM revocation_event')\n"
    "            )\n"
)
ANCHOR = "            raise exception.TokenNotFound(_('No token in the request'))\n"


def gate_noise() -> ModuleType:
    """benchmarks/gate_noise.py: its 150 ms tree and its sleep patch, for the gate's tests."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "gate_noise.py"
    spec = importlib.util.spec_from_file_location("gate_noise", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def extra_sql_tree() -> Path:
    """30.0.0 with one more SQL query per token validation (keystone/token/provider.py)."""
    name = "keystone-30.0.0-extra-sql"
    tree = venv.cache_root() / "trees" / name
    if (tree / ".patched").exists():
        return tree
    tree = gate_noise().release_tree(tree.parent, name)
    provider = tree / "keystone" / "token" / "provider.py"
    text = provider.read_text()
    at = text.index(ANCHOR) + len(ANCHOR)
    provider.write_text(text[:at] + "\n" + EXTRA_SQL_PATCH + text[at:])
    (tree / ".patched").write_text("")
    return tree


# More work per revocation event a validation reads back: each is turned into
# a model ten times more. Once more was about 2 % of a cache-off validation
# with 1,000 chain events (py-spy: RevokeEvent.to_dict +2.1 ms per request),
# below the gate's 10 % threshold.
PER_EVENT_PATCH = (
    "        events = self.driver.list_events(token=token)\n"
    "        _copies = [self.model.RevokeEvent(**e.to_dict()) for e in events for _ in range(10)]\n"
)
PER_EVENT_OLD = (
    "        if revoke_model.is_revoked(\n            self.driver.list_events(token=token), token\n"
)
PER_EVENT_NEW = "        if revoke_model.is_revoked(\n            events, token\n"


def patch_per_event(tree: Path) -> None:
    """TREE's revocation check rebuilds each event it reads back ten times more."""
    core = tree / "keystone" / "revoke" / "core.py"
    text = core.read_text()
    assert PER_EVENT_OLD in text, "keystone/revoke/core.py changed: update the patch"
    text = text.replace(PER_EVENT_OLD, PER_EVENT_NEW)
    at = text.index("        if revoke_model.is_revoked(\n            events, token")
    core.write_text(text[:at] + PER_EVENT_PATCH + text[at:])


# Three more SQL statements in the validation of an application-credential token, and
# in no other token path: the user's role assignments on the token's project, listed
# three times straight from the assignment driver (its SQL, never the cache), after
# the token is read (cached or not) and before it is checked.
APP_CRED_ANCHOR = "            token = self._validate_token(token_id)\n"
APP_CRED_SQL_PATCH = (
    "            if token.application_credential_id:  # counters test: this token path only\n"
    "                for _ in range(3):\n"
    "                    PROVIDERS.assignment_api.driver.list_role_assignments(\n"
    "                        user_id=token.user_id, project_ids=[token.project_id]\n"
    "                    )\n"
)


def patch_app_cred_sql(tree: Path) -> None:
    """TREE's token validation lists role assignments three times for an app-cred token."""
    provider = tree / "keystone" / "token" / "provider.py"
    text = provider.read_text()
    assert text.count(APP_CRED_ANCHOR) == 1, "keystone/token/provider.py changed: update it"
    at = text.index(APP_CRED_ANCHOR) + len(APP_CRED_ANCHOR)
    provider.write_text(text[:at] + APP_CRED_SQL_PATCH + text[at:])


def patched_tree(name: str, *patches: Callable[[Path], None]) -> Path:
    """30.0.0's sdist as NAME in the cache with PATCHES applied (once: a marker says so)."""
    tree = venv.cache_root() / "trees" / name
    if (tree / ".patched").exists():
        return tree
    tree = gate_noise().release_tree(tree.parent, name)
    for patch in patches:
        patch(tree)
    (tree / ".patched").write_text("")
    return tree


def per_event_tree() -> Path:
    """30.0.0 whose revocation check does a little more work per event it reads back."""
    return patched_tree("keystone-30.0.0-per-event-x10", patch_per_event)


def sized_gate_tree() -> Path:
    """The sized gate's candidate: 30.0.0 with two changes on two token paths.

    Its revocation check does more work per event it reads back (every
    validation: caught by its latency, the cache-off pass), and an
    application-credential token's validation does three more SQL
    statements (caught by that workload's counter, no other's).
    """
    return patched_tree(
        "keystone-30.0.0-per-event-x10-app-cred-sql", patch_per_event, patch_app_cred_sql
    )


if __name__ == "__main__":
    path = extra_sql_tree()
    print(path)
    print(venv.ensure_keystone_env(str(path), progress=print))
