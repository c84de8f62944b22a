"""The plain Rally path, exactly as doc/source/rally.rst lists it, against a local Keystone.

A shell sources the Keystone's openrc and runs the documented commands one by
one: ``rally db ensure``, ``rally env create --from-sysenv``, ``rally env
check``, ``rally task start``, ``rally task report`` (JSON and HTML) and
``rally task export --type keystone-bench-summary``. HOME and TMPDIR point
into the test's directory, so Rally's database (``$TMPDIR/rally.sqlite``) and
its env in use (``~/.rally``) are the test's own, as a new user's would be.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rally_keystone_bench import shipped

pytestmark = pytest.mark.functional

DOC = Path(__file__).resolve().parents[2] / "doc" / "source" / "rally.rst"
# Small enough for CI: every workload of the suite, one user, two iterations.
SMALL = {
    "times": 2,
    "concurrency": 1,
    "bursts": 1,
    "burst_count": 2,
    "burst_parallel": 1,
    "tenants": 1,
    "users_per_tenant": 1,
}


def documented_commands() -> list[str]:
    """The console lines of rally.rst's plain-Rally block ($ COMMAND), in order."""
    text = DOC.read_text()
    block = text[text.index(".. plain-rally-start") : text.index(".. plain-rally-end")]
    return [line.strip()[2:] for line in block.splitlines() if line.strip().startswith("$ ")]


def test_the_documented_rally_commands_run_the_token_suite(small_keystone, tmp_path):
    commands = documented_commands()
    assert [" ".join(c.split()[:3]) for c in commands] == [
        "source RUN_DIR/openrc",
        "rally db ensure",
        "rally env create",
        "rally env check",
        "rally task start",
        "rally task report",
        "rally task report",
        "rally task export",
    ]
    work = tmp_path / "work"
    (work / "tasks").mkdir(parents=True)
    (work / "tasks" / "token-suite.yaml").write_text(
        (shipped.DATA / "tasks" / "token-suite.yaml").read_text()
    )
    script = ["set -e"]
    for command in commands:
        command = command.replace("RUN_DIR", str(small_keystone.run_dir))
        if command.startswith("rally task start"):
            command += f" --task-args '{json.dumps(SMALL)}'"
        script.append(f"echo '>>> {command}'")
        script.append(command)
    env = {
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path),
        "LANG": "C.UTF-8",
    }
    (tmp_path / "home").mkdir()
    proc = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert (tmp_path / "rally.sqlite").is_file()  # the database rally db ensure made
    report = json.loads((work / "token-suite.json").read_text())
    workloads = [w for t in report["tasks"] for s in t["subtasks"] for w in s["workloads"]]
    assert len(workloads) == 6 and all(w["pass_sla"] for w in workloads)
    assert "<html" in (work / "token-suite.html").read_text().lower()
    summary = json.loads((work / "summary" / "summary.json").read_text())
    assert len(summary["workloads"]) == 6
    assert re.search(r"Task\s+[0-9a-f-]{36}: finished", out)
