"""The Zuul job and the GitHub workflow call a gate command line that parses."""

import re
import shlex
from pathlib import Path

import yaml

from rally_keystone_bench import cli

ROOT = Path(__file__).resolve().parents[2]


def _gate_argv(text: str) -> list[str]:
    """The keystone-bench gate command in TEXT, Jinja variables given sample values."""
    line = re.search(r"keystone-bench (gate\b.*?)(?:\n\s*\n|\Z)", text, re.S).group(1)
    line = re.sub(r"\{\{\s*keystone_bench_baseline\s*\}\}", "keystone==30.0.0", line)
    line = re.sub(r"\{\{[^}]*\}\}", "X", line)
    return shlex.split(line.replace(">-", ""))


def _check(argv: list[str]) -> None:
    args = cli.build_parser().parse_args(argv)
    assert args.func == "rally_keystone_bench.gate:main"
    assert args.baseline.startswith("keystone==")
    assert (ROOT / args.task).is_file()


def test_zuul_playbook_gate_command_parses():
    jobs = yaml.safe_load((ROOT / ".zuul.yaml").read_text())
    job = jobs[0]["job"]
    playbook = ROOT / job["run"]
    plays = yaml.safe_load(playbook.read_text())
    cmds = [t["ansible.builtin.shell"] for t in plays[0]["tasks"] if "ansible.builtin.shell" in t]
    cmd = next(c["cmd"] for c in cmds if isinstance(c, dict) and "gate" in c["cmd"])
    text = cmd.replace("{{ keystone_bench_baseline }}", job["vars"]["keystone_bench_baseline"])
    _check(_gate_argv("keystone-bench " + text.split("keystone-bench ", 1)[1]))


def test_github_workflow_gate_command_parses():
    wf = yaml.safe_load((ROOT / ".github/workflows/keystone-gate.yaml").read_text())
    runs = [
        s["run"] for s in wf["jobs"]["gate"]["steps"] if "keystone-bench gate" in s.get("run", "")
    ]
    assert len(runs) == 1
    _check(shlex.split(runs[0])[1:])
