"""The documentation: generated reference complete, no placeholder, studies named by title."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "doc" / "source"
sys.path.insert(0, str(DOC / "_ext"))
import keystone_bench_reference as reference  # noqa: E402

# The names DESIGN.md promises users; the reference must show at least these.
PLUGINS = {
    "KeystoneTokens.authenticate",
    "KeystoneTokens.validate",
    "KeystoneTokens.concurrent_create",
    "KeystoneTokens.lifecycle",
    "keystone_tenants",
    "keystone_users",
    "token_pool",
    "latency_slope",
    "pooled_rps",
    "keystone-bench-summary",
}
VERBS = {"keystone up", "keystone down", "keystone status", "mock", "run", "report"}
VERBS |= {"compare", "capacity", "matrix", "gate", "cleanup"}


def _user_facing_files() -> list[Path]:
    files = [ROOT / "README.rst", *DOC.rglob("*.rst"), *DOC.rglob("*.py")]
    files += [*(ROOT / "tasks").glob("*.yaml"), *(ROOT / "deployments").glob("*.yaml")]
    return [f for f in files if f.is_file()]


def _leaf_verbs(parser: argparse.ArgumentParser, prefix: str = "") -> set[str]:
    found = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{prefix} {name}".strip()
                found |= _leaf_verbs(sub, full) or {full}
    return found


def test_cli_reference_has_every_verb_of_the_parser():
    from rally_keystone_bench import cli

    verbs = _leaf_verbs(cli.build_parser())
    assert VERBS <= verbs
    text = reference.cli_rst()
    missing = [v for v in sorted(verbs) if f"keystone-bench {v}\n" not in text]
    assert missing == []
    # each verb's own options are there, as argparse prints them
    assert "--deployments FILE.yaml" in text and "--candidate-option KEY=VALUE" in text


def test_plugin_reference_has_every_plugin_and_its_schema():
    names = {p.get_name() for p in reference.plugins()}
    assert PLUGINS <= names
    text = reference.plugins_rst()
    missing = [n for n in sorted(names) if f"\n{n}\n~" not in text]
    assert missing == []
    # CONFIG_SCHEMA fields, with their documented defaults and bounds
    assert "``max_slope`` (number, >= 0.0)" in text
    assert "``tokens_per_user`` (integer, >= 1)" in text
    assert '``method`` (string, default "GET")' in text


def test_deployment_reference_has_every_field_and_shipped_file():
    import dataclasses

    from rally_keystone_bench.deploy.deployment import Deployment

    text = reference.deployments_rst()
    for field in dataclasses.fields(Deployment):
        assert f"``{field.name}``" in text
    for path in (ROOT / "deployments").glob("*.yaml"):
        assert f"deployments/{path.name}" in text


@pytest.mark.parametrize("word", ["PLACEHOLDER", "TODO"])
def test_no_placeholder_survives_in_readme_or_docs(word):
    hits = [
        f"{f.relative_to(ROOT)}:{n}"
        for f in [ROOT / "README.rst", *DOC.rglob("*.rst")]
        for n, line in enumerate(f.read_text().splitlines(), 1)
        if word in line
    ]
    assert hits == []


def test_studies_are_named_by_title_never_by_seed():
    pattern = re.compile(r"\bseeds?\b(?!\s*=)", re.IGNORECASE)
    hits = [
        f"{f.relative_to(ROOT)}:{n}: {line.strip()}"
        for f in _user_facing_files()
        for n, line in enumerate(f.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []


def test_readme_is_short_and_names_the_commands():
    text = (ROOT / "README.rst").read_text()
    assert len(text.splitlines()) < 200
    for command in ("tox -e bench", "tox -e slow", "$ tox "):
        assert command in text


def test_every_benchmark_prints_the_shared_machine_line():
    scripts = [p for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_")]
    assert scripts
    without = [p.name for p in scripts if "_machine" not in p.read_text()]
    assert without == []
