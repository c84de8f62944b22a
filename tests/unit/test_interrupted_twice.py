"""A second Ctrl-C on run --existing-cloud: never "passed", and what may be left (item 5)."""

import types
from pathlib import Path

from rally_keystone_bench import cli
from rally_keystone_bench.driver import left_behind
from rally_keystone_bench.driver.outcome import TaskOutcome
from rally_keystone_bench.errors import Interrupted
from rally_keystone_bench.verbs import run

# A task Rally's format accepts (every verb checks it before anything starts).
TASK_TEXT = "version: 2\ntitle: t\nsubtasks: [{title: s, scenario: {Dummy.dummy: {}}}]\n"


def workload():
    return types.SimpleNamespace(pass_sla=True, label=lambda: "authenticate", actions={}, sla=[])


def test_an_interrupted_task_has_no_sla_verdict():
    outcome = TaskOutcome(Path("t.yaml"), "u", 0, workloads=[workload()], interrupted_by=2)
    assert not outcome.sla_passed
    table = run.format_table(outcome.workloads, interrupted=outcome.interrupted)
    assert "SLA passed" not in table and "interrupted by SIGINT: no SLA verdict" in table


def test_run_existing_cloud_interrupted_twice_says_what_may_be_left(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("t.yaml").write_text(TASK_TEXT)
    for k, v in dict(
        OS_AUTH_URL="http://127.0.0.1:5000/v3",
        OS_USERNAME="admin",
        OS_PASSWORD="pw",
        OS_PROJECT_NAME="admin",
    ).items():
        monkeypatch.setenv(k, v)
    cut = TaskOutcome(Path("t.yaml"), "u", 0, workloads=[workload()], interrupted_by=2)
    cut.cleanup_cut_short = True
    cut.workload_uuids = ["1a2b3c4d-0000-4000-8000-000000000001"]

    def interrupted_twice(*args, **kwargs):
        exc = Interrupted(2)
        exc.outcomes = [cut]
        raise exc

    monkeypatch.setattr(run, "_run_tasks", interrupted_twice)
    assert cli.main(["run", "t.yaml", "--existing-cloud"]) == 130
    out, err = capsys.readouterr()
    assert "SLA passed" not in out
    assert "interrupted twice: cleanup cut short" in out
    assert "rkb-1a2b3c4d-*" in out and "c_rally_1a2b3c4d_*" in out
    assert "keystone-bench cleanup --workload-id 1a2b3c4d" in out
    assert "openstack" not in out  # our own verb, not the client's delete commands
    assert err.strip().splitlines()[-1] == "keystone-bench: interrupted by SIGINT"


def test_a_task_that_started_no_workload_leaves_nothing_to_say(capsys):
    cut = TaskOutcome(Path("t.yaml"), None, -9, cleanup_cut_short=True)
    left_behind.say_left_behind([cut], "http://127.0.0.1:5000/v3", None)
    assert capsys.readouterr().out == ""


def test_a_killed_rally_names_the_cleanup_with_the_spec(capsys, tmp_path):
    killed = TaskOutcome(Path("t.yaml"), "u", -9, workload_uuids=["abcdef01-2", "12345678-9"])
    spec = tmp_path / "env spec.yaml"
    left_behind.say_left_behind([killed], "http://127.0.0.1:5000/v3", str(spec))
    out = capsys.readouterr().out
    assert out.startswith("rally task start exited -9 before its cleanup ended")
    assert out.rstrip().endswith(
        f"keystone-bench cleanup --workload-id abcdef01 --workload-id 12345678 --spec '{spec}'"
    )


def test_a_killed_rally_gets_no_sla_verdict():
    killed = TaskOutcome(Path("t.yaml"), "u", -9, workloads=[workload()])
    assert not killed.sla_passed
    table = run.format_table(killed.workloads, interrupted=killed.no_verdict)
    assert "SLA passed" not in table and "rally task start exited -9: no SLA verdict" in table
    assert TaskOutcome(Path("t.yaml"), "u", 0, workloads=[workload()]).sla_passed
