"""What a new user meets first: --version, help on every option, `tasks` described."""

import argparse
import importlib.metadata
import json
import sys
from pathlib import Path

import pytest

from rally_keystone_bench import cli, shipped
from rally_keystone_bench.history import records

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import synthetic  # noqa: E402


def _undocumented(parser: argparse.ArgumentParser, path: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _undocumented(sub, f"{path} {name}")
        elif not action.help and not isinstance(action, argparse._HelpAction):
            yield f"{path} {'/'.join(action.option_strings) or action.dest}"


def test_every_option_and_argument_of_every_verb_has_help():
    missing = list(_undocumented(cli.build_parser(), "keystone-bench"))
    assert missing == []


def test_version_is_the_installed_one_from_git_tags(capsys):
    assert cli.main(["--version"]) == 0
    printed = capsys.readouterr().out.strip()
    installed = importlib.metadata.version("rally-keystone-bench")
    assert printed == f"keystone-bench {installed}"
    assert installed != "0.0.0", "built without setuptools-scm: the version says nothing"


def test_tasks_lists_every_shipped_file_with_a_description(capsys):
    assert cli.main(["tasks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for kind in shipped.KINDS:
        for path in shipped.files(kind):
            [line] = [x for x in lines if x.split()[:1] == [path.name]]
            description = line.split(None, 1)[1]
            assert len(description) > 10 and "{{" not in description and "{#" not in description
    suite = next(x for x in lines if x.split()[:1] == ["token-suite.yaml"])
    assert suite.split(None, 1)[1] == "Keystone token suite"


def test_summary_json_and_history_name_the_tool_version(tmp_path):
    src = synthetic.write(
        str(tmp_path / "result.json"),
        synthetic.report([synthetic.workload(synthetic.iterations(20))]),
    )
    assert cli.main(["report", src, "--out", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    installed = importlib.metadata.version("rally-keystone-bench")
    assert summary["tool_version"] == installed
    assert records.tool_version().startswith(installed)


@pytest.mark.parametrize("verb", ["run", "compare", "gate", "capacity", "tasks"])
def test_verb_help_exits_0(verb, capsys):
    assert cli.main([verb, "--help"]) == 0
    assert "--" in capsys.readouterr().out
