"""A bad task file is one line and exit 2 before anything starts (issue 45, items 2 and 10).

Each verb that takes a task (run, matrix, gate --task) reads, renders and
checks it as Rally would before it builds an environment or starts a
Keystone: one line naming the file, the line and what is wrong, within
5 s, and nothing written where the verb runs.
"""

from __future__ import annotations

import os
import time

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.deploy import venv
from rally_keystone_bench.deploy.keystone import LocalKeystone

VERBS = {
    "run": ["run", "{task}"],
    "matrix": ["matrix", "--deployments", "deployments/workers.yaml", "--task", "{task}"],
    "gate": ["gate", "--baseline", "keystone==30.0.0", "--candidate", "keystone==30.0.0",
             "--task", "{task}"],
}  # fmt: skip

BAD = {
    "bad.yaml": (b"version: 2\ntitle: t\nsubtasks:\n  - title: a\n    x: [\n  b: c\n",
                 "task file bad.yaml line 6: expected ',' or ']'"),
    "bad.json": (b'{"version": 2,\n "subtasks": [}\n',
                 "task file bad.json line 2: expected the node content, but found '}'"),
    "binary.yaml": (b"\x00\x01\x02\xff", "task file binary.yaml is a binary file, not text"),
    "empty.yaml": (b"", "task file empty.yaml is empty"),
    "schema.yaml": (b"version: 2\ntitle: t\nsubtasks:\n  - title: a\n    scenrio: {}\n",
                    "task file schema.yaml is not a Rally task: Subtask #1. Additional "
                    "properties are not allowed ('scenrio' was unexpected)"),
    "jinja.yaml": (b"version: 2\n{% if x %}\n", "task file jinja.yaml line 2: Unexpected end"),
    "args.yaml": (b"version: 2\ntitle: {{ who }}\nsubtasks: []\n",
                  "task file args.yaml needs the task argument(s) who: give them with --task-args"),
    "adir": (None, "task file adir is a directory, not a file"),
    "fifo.yaml": ("fifo", "task file fifo.yaml is not a regular file (a FIFO, socket or device)"),
}  # fmt: skip


@pytest.fixture
def nothing_starts(monkeypatch, tmp_path):
    """The working directory is TMP_PATH; building or starting a Keystone fails the test."""

    def refuse(*_a, **_k):
        raise AssertionError("a Keystone environment was built or started")

    monkeypatch.setattr(venv, "ensure_keystone_env", refuse)
    monkeypatch.setattr(LocalKeystone, "start", refuse)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("verb", sorted(VERBS))
@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_task_file_is_one_line_before_anything_starts(capsys, nothing_starts, verb, name):
    content, said = BAD[name]
    path = nothing_starts / name
    if content is None:
        path.mkdir()
    elif content == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(content)
    before = sorted(os.listdir(nothing_starts))
    t0 = time.monotonic()
    assert cli.main([a.replace("{task}", name) for a in VERBS[verb]]) == 2
    assert time.monotonic() - t0 < 5.0
    err = capsys.readouterr().err
    assert err.splitlines() == [err.splitlines()[0]] and said in err, err
    assert sorted(os.listdir(nothing_starts)) == before  # no runs/, no reports/


@pytest.mark.parametrize("name", ["token-suite.yaml", "gate.yaml", "data-sizes.yaml"])
def test_the_shipped_tasks_pass_the_check(name):
    from rally_keystone_bench.driver import task_files

    args = {"baseline": "b", "candidate": "c"} if name == "gate.yaml" else {}
    assert task_files.checked(name, args).name == name
