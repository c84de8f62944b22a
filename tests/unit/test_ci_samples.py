"""The Zuul job and the GitHub workflow: a gate command line that parses, and
exit 3 (inconclusive) taken as recheck advice, never as a pass of 1 or a failure."""

import os
import re
import shlex
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

from rally_keystone_bench import cli
from rally_keystone_bench.verbs import gate

ROOT = Path(__file__).resolve().parents[2]


def _gate_argv(text: str) -> list[str]:
    """The keystone-bench gate command in TEXT, Jinja variables given sample values."""
    line = re.search(r"keystone-bench (gate\b.*?)(?:\n\s*\n|\n\s*rc=|\Z)", text, re.S).group(1)
    line = re.sub(r"\{\{\s*keystone_bench_baseline_ref\s*\}\}", "HEAD~1", line)
    line = re.sub(r"\{\{[^}]*\}\}", "X", line)
    return shlex.split(line.replace(">-", ""))


def _check(argv: list[str]) -> None:
    args = cli.build_parser().parse_args(argv)
    assert args.func is gate.main
    # The change against its parent in the same checkout, never a fixed release.
    assert args.baseline is None and args.baseline_ref
    assert (ROOT / args.task).is_file()


def _zuul_gate_task() -> tuple[dict, dict]:
    jobs = yaml.safe_load((ROOT / ".zuul.yaml").read_text())
    job = jobs[0]["job"]
    plays = yaml.safe_load((ROOT / job["run"]).read_text())
    tasks = plays[0]["tasks"]
    shells = [(t, t.get("ansible.builtin.shell")) for t in tasks]
    gate = next(t for t, sh in shells if isinstance(sh, dict) and "gate" in sh.get("cmd", ""))
    return job, {"gate": gate, "tasks": tasks}


def test_zuul_playbook_gate_command_parses():
    job, found = _zuul_gate_task()
    cmd = found["gate"]["ansible.builtin.shell"]["cmd"]
    assert job["vars"]["keystone_bench_baseline_ref"] == "HEAD~1"
    text = cmd.replace(
        "{{ keystone_bench_baseline_ref }}", job["vars"]["keystone_bench_baseline_ref"]
    )
    _check(_gate_argv("keystone-bench " + text.split("keystone-bench ", 1)[1]))


@pytest.mark.parametrize("rc,fails,advice", [(0, False, False), (1, True, False),
                                             (2, True, False), (3, False, True)])  # fmt: skip
def test_zuul_job_fails_on_1_and_2_and_advises_a_recheck_on_3(rc, fails, advice):
    _, found = _zuul_gate_task()
    gate = found["gate"]
    name = gate["register"]
    env = jinja2.Environment()
    assert bool(env.compile_expression(gate["failed_when"])(**{name: {"rc": rc}})) is fails
    shown = [
        t for t in found["tasks"]
        if "when" in t and env.compile_expression(t["when"])(**{name: {"rc": rc}})
    ]  # fmt: skip
    assert bool(shown) is advice
    if advice:
        assert "recheck" in shown[0]["ansible.builtin.debug"]["msg"]


def _github_step() -> dict:
    wf = yaml.safe_load((ROOT / ".github/workflows/keystone-gate.yaml").read_text())
    steps = [s for s in wf["jobs"]["gate"]["steps"] if "keystone-bench gate" in s.get("run", "")]
    assert len(steps) == 1
    return steps[0]


def test_github_workflow_gate_command_parses():
    step = _github_step()
    argv = _gate_argv(step["run"])
    _check(argv)
    assert argv[argv.index("--baseline-ref") + 1] == "$BASE_SHA"
    assert step["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
    wf = yaml.safe_load((ROOT / ".github/workflows/keystone-gate.yaml").read_text())
    keystone = next(
        s for s in wf["jobs"]["gate"]["steps"] if s.get("with", {}).get("path") == "keystone"
    )
    assert keystone["with"]["fetch-depth"] == 0  # the base commit must be in the checkout


@pytest.mark.parametrize("rc,job_rc,warned", [(0, 0, False), (1, 1, False),
                                              (2, 2, False), (3, 0, True)])  # fmt: skip
def test_github_step_passes_3_with_a_warning_and_fails_on_1(tmp_path, rc, job_rc, warned):
    # The step's script as GitHub runs it (bash), with a keystone-bench that exits RC.
    step = _github_step()
    assert step.get("shell") == "bash"
    fake = tmp_path / "bin" / "keystone-bench"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nexit {rc}\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    proc = subprocess.run(
        ["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == job_rc
    assert ("::warning" in proc.stdout) is warned
    if warned:
        assert "recheck advice" in proc.stdout
