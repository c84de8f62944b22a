"""The sized gate's candidate tree: its two patches apply to Keystone 30.0.0's own source.

The patch step only, on copies of the files it changes, taken from the
cached Keystone 30.0.0 environment (built by any gate against
keystone==30.0.0; without one, skipped: tests/functional/test_gate_sized_live.py
applies them for real). No Keystone starts here.
"""

from __future__ import annotations

import ast
import importlib.util
import shutil
from pathlib import Path

import pytest

from rally_keystone_bench.deploy import venv

FUNCTIONAL = Path(__file__).resolve().parents[1] / "functional"
CHANGED = ("keystone/token/provider.py", "keystone/revoke/core.py")


def patched_trees():
    spec = importlib.util.spec_from_file_location(
        "_patched_trees", FUNCTIONAL / "_patched_trees.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def release_source() -> Path:
    """site-packages of a cached keystone==30.0.0 environment (its keystone/ is the sdist's)."""
    found = sorted(venv.cache_root().glob("venvs/keystone==30.0.0-*/lib/python3*/site-packages"))
    found = [p for p in found if (p / "keystone" / "token" / "provider.py").exists()]
    if not found:
        pytest.skip("no cached keystone==30.0.0 environment to read its source from")
    return found[0]


def function(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef:
    (klass,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    (found,) = [n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return found


def test_both_patches_apply_to_30_0_0_and_touch_only_their_paths(tmp_path, release_source):
    trees = patched_trees()
    for rel in CHANGED:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(release_source / rel, tmp_path / rel)
    trees.patch_per_event(tmp_path)
    trees.patch_app_cred_sql(tmp_path)
    provider = ast.parse((tmp_path / CHANGED[0]).read_text())
    ast.parse((tmp_path / CHANGED[1]).read_text())  # the revocation patch compiles too
    validate = ast.unparse(function(provider, "Manager", "validate_token"))
    # the extra listing runs for an application-credential token only, after it is read
    guard = "if token.application_credential_id:"
    assert guard in validate and validate.index("self._validate_token(") < validate.index(guard)
    assert "PROVIDERS.assignment_api.driver.list_role_assignments(" in validate
    # nothing else of the module changed: only the lines the patch adds
    before = (release_source / CHANGED[0]).read_text()
    after = (tmp_path / CHANGED[0]).read_text()
    assert after != before and after.replace(trees.APP_CRED_SQL_PATCH, "", 1) == before
    # the driver it calls takes the arguments the patch passes, and reads the assignment table
    sql = (release_source / "keystone/assignment/backends/sql.py").read_text()
    listing = function(ast.parse(sql), "Assignment", "list_role_assignments")
    assert {"user_id", "project_ids"} <= {a.arg for a in listing.args.args}
    assert "__tablename__ = 'assignment'" in sql


def test_a_changed_release_is_said_not_patched_silently(tmp_path):
    trees = patched_trees()
    provider = tmp_path / "keystone" / "token" / "provider.py"
    provider.parent.mkdir(parents=True)
    provider.write_text("def validate_token(token_id):\n    return token_id\n")
    with pytest.raises(AssertionError, match="provider.py changed"):
        trees.patch_app_cred_sql(tmp_path)
