"""The gate's extension runs only the workloads short of a verdict (driver/task_subset.py)."""

from __future__ import annotations

import json
import types

from rally_keystone_bench.driver import gate_runs, task_subset, workspace
from rally_keystone_bench.verbs import gate

ARGS = {
    "baseline": "/a", "candidate": "/b", "baseline_nocache": "/a0", "candidate_nocache": "/b0",
    "seconds": 28,
}  # fmt: skip


def test_a_subset_holds_the_named_workloads_exactly_as_the_whole_task_renders_them(tmp_path):
    task = workspace.task_file(gate.CLOUD_TASK)
    whole = task_subset.render(task, ARGS)["subtasks"]
    wanted = [whole[2]["title"], whole[-1]["title"]]
    path = task_subset.subset(task, ARGS, wanted, tmp_path / "ext.json")
    assert path is not None
    part = json.loads(path.read_text())
    assert [s["title"] for s in part["subtasks"]] == wanted
    assert part["subtasks"] == [whole[2], whole[-1]]  # same scenario, runner, contexts
    assert part["subtasks"][0]["runner"]["constant_for_duration"]["duration"] == 28
    assert "{{" not in path.read_text() and "{%" not in path.read_text()


def test_no_subset_when_every_workload_is_wanted_or_titles_cannot_tell_them_apart(tmp_path):
    task = workspace.task_file(gate.CLOUD_TASK)
    titles = [s["title"] for s in task_subset.render(task, ARGS)["subtasks"]]
    assert task_subset.subset(task, ARGS, titles, tmp_path / "all.json") is None
    untitled = tmp_path / "untitled.yaml"
    untitled.write_text(
        "version: 2\ntitle: t\nsubtasks:\n"
        "  - scenario: {Dummy.dummy: {}}\n    runner: {constant: {times: 1}}\n"
        "  - title: b\n    scenario: {Dummy.dummy: {}}\n    runner: {constant: {times: 1}}\n"
    )
    assert task_subset.subset(untitled, {}, ["b"], tmp_path / "u.json") is None
    assert task_subset.subset(task, ARGS, ["no such workload"], tmp_path / "n.json") is None


def test_the_gate_extends_with_the_short_workloads_only(tmp_path):
    task = workspace.task_file(gate.CLOUD_TASK)
    titles = [s["title"] for s in task_subset.render(task, ARGS)["subtasks"]]
    verdicts = [types.SimpleNamespace(workload=t, inconclusive=None) for t in titles]
    verdicts[4].inconclusive = verdicts[7].inconclusive = "9 clean blocks, 12 needed"
    result = types.SimpleNamespace(actions=verdicts)
    run_task, run_args, count = gate_runs.next_run(task, ARGS, result, len(titles), tmp_path)
    assert count == 2 and run_args == {}
    assert [s["title"] for s in json.loads(run_task.read_text())["subtasks"]] == [
        titles[4],
        titles[7],
    ]
    for v in verdicts:  # every workload short: the whole task again, with its arguments
        v.inconclusive = "too few"
    whole = (task, ARGS, len(titles))
    assert gate_runs.next_run(task, ARGS, result, len(titles), tmp_path) == whole
