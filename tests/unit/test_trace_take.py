"""Taking a task's trace records while Keystone's workers go on appending to their files."""

from __future__ import annotations

import json
import os

from rally_keystone_bench.deploy import tracing


def _line(n: int) -> str:
    return json.dumps({"base_id": f"b{n}", "kind": "sql"}) + "\n"


def _ids(records: list[dict]) -> list[str]:
    return [r["base_id"] for r in records]


def test_each_take_returns_what_was_written_since_the_last_one(tmp_path):
    tracing.store_path(tmp_path).mkdir()
    path = tracing.store_path(tmp_path) / "trace-101.jsonl"
    worker = open(path, "a")  # a Keystone worker keeps its file open
    worker.write(_line(1) + _line(2))
    worker.flush()
    assert _ids(tracing.take_records(tmp_path)) == ["b1", "b2"]
    assert tracing.take_records(tmp_path) == []
    worker.write(_line(3))
    worker.flush()
    assert _ids(tracing.take_records(tmp_path)) == ["b3"]
    worker.close()
    # nothing is emptied: the whole store still reads in full
    assert _ids(tracing.read_records(tmp_path)) == ["b1", "b2", "b3"]
    assert os.stat(tracing.store_path(tmp_path) / tracing.TAKEN).st_mode & 0o777 == 0o600


def test_a_line_still_being_written_is_the_next_takes(tmp_path):
    # before: the store was read, then emptied; a record appended in between was lost
    tracing.store_path(tmp_path).mkdir()
    path = tracing.store_path(tmp_path) / "trace-7.jsonl"
    half = _line(2)[:10]
    path.write_text(_line(1) + half)
    assert _ids(tracing.take_records(tmp_path)) == ["b1"]
    with open(path, "a") as worker:
        worker.write(_line(2)[10:] + _line(3))
    assert _ids(tracing.take_records(tmp_path)) == ["b2", "b3"]


def test_files_are_taken_each_from_its_own_place_and_audit_files_are_left(tmp_path):
    store = tracing.store_path(tmp_path)
    store.mkdir()
    (store / "trace-1.jsonl").write_text(_line(1))
    assert _ids(tracing.take_records(tmp_path)) == ["b1"]
    (store / "trace-2.jsonl").write_text(_line(2))  # a worker that started later
    (store / "audit-1.jsonl").write_text(_line(9))
    assert _ids(tracing.take_records(tmp_path)) == ["b2"]
    assert tracing.take_records(tmp_path / "none") == []
