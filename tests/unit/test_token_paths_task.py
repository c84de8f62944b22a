"""tasks/token-paths.yaml as Rally renders it: every path issued and validated in
every scope it has, and domain/system scope always with the context granting it."""

from __future__ import annotations

from collections import Counter

import yaml
from rally import api

from rally_keystone_bench import shipped


def render(**args) -> list[dict]:
    path = shipped.DATA / "tasks" / "token-paths.yaml"
    text = api._Task(None).render_template(path.read_text(), str(path.parent), **args)
    return yaml.safe_load(text)["subtasks"]


def workloads(subtasks: list[dict]) -> Counter:
    seen: Counter = Counter()
    for sub in subtasks:
        ((name, args),) = sub["scenario"].items()
        how = (args.get("method"), args.get("include_catalog")) if "validate" in name else None
        seen[(name.split(".")[1], args["path"], args["scope"], how)] += 1
        granted = "keystone_scope_roles" in sub["contexts"]
        assert granted == (args["scope"] != "project"), sub["title"]
    return seen


def test_paths_with_three_scopes_are_issued_and_validated_in_each():
    seen = workloads(render())
    validations = [("GET", False), ("GET", True), ("HEAD", False)]
    for path in ("password", "token", "totp"):
        for scope in ("project", "domain", "system"):
            assert seen[("issue_path", path, scope, None)] == 1
            for how in validations:
                assert seen[("validate_path", path, scope, how)] == 1, (path, scope, how)
    for path in ("application_credential", "trust"):  # their scope is their own project
        assert {k[2] for k in seen if k[1] == path} == {"project"}
    assert sum(seen.values()) == 3 * (3 + 9) + 2 * (1 + 3)


def test_scopes_limits_the_paths_that_have_three():
    seen = workloads(render(paths=["password", "trust"], scopes=["system"]))
    assert {(k[1], k[2]) for k in seen} == {("password", "system"), ("trust", "project")}
    assert sum(seen.values()) == (1 + 3) + (1 + 3)
