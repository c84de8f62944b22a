"""The parallel parts run the longest files first and report each file's time."""

from __future__ import annotations

import json

import _file_order as fo


def test_the_longest_file_runs_first_and_a_files_tests_stay_together_in_order():
    ids = [
        "tests/unit/test_a.py::t1",
        "tests/unit/test_a.py::t2",
        "tests/functional/test_long.py::t1",
        "tests/functional/test_mid.py::t1[x]",
        "tests/functional/test_long.py::t2",
        "tests/functional/test_mid.py::t1[y]",
        "tests/unit/test_b.py::t1",
    ]
    seconds = {"tests/functional/test_long.py": 300.0, "tests/functional/test_mid.py": 60.0}
    got = [ids[i] for i in fo.longest_first(ids, seconds)]
    assert got == [
        "tests/functional/test_long.py::t1",
        "tests/functional/test_long.py::t2",
        "tests/functional/test_mid.py::t1[x]",
        "tests/functional/test_mid.py::t1[y]",
        # unknown files: 0 s, in collection order
        "tests/unit/test_a.py::t1",
        "tests/unit/test_a.py::t2",
        "tests/unit/test_b.py::t1",
    ]


def test_without_a_table_the_collection_order_stays():
    ids = ["tests/b.py::x", "tests/a.py::y", "tests/b.py::z"]
    assert [ids[i] for i in fo.longest_first(ids, {})] == [ids[0], ids[2], ids[1]]


def test_the_clock_sums_a_files_phases_and_writes_a_table_the_order_reads(tmp_path):
    clock = fo.FileClock()
    for nodeid, d in [("tests/f/test_x.py::a", 1.5), ("tests/f/test_x.py::a", 10.0),
                      ("tests/f/test_y.py::b[1]", 2.0)]:  # fmt: skip
        clock.add(nodeid, d)
    assert clock.lines() == ["    11.5s  tests/f/test_x.py", "     2.0s  tests/f/test_y.py"]
    out = tmp_path / "durations.json"
    out.write_text(json.dumps({"seconds": {"tests/f/test_old.py": 5.0, "tests/f/test_y.py": 9}}))
    clock.write(out)  # merged: this run's files replace theirs, others stay
    assert fo.load_table(out) == {
        "tests/f/test_x.py": 11.5,
        "tests/f/test_old.py": 5.0,
        "tests/f/test_y.py": 2.0,
    }
    assert list(json.loads(out.read_text())["seconds"]) == [
        "tests/f/test_x.py", "tests/f/test_old.py", "tests/f/test_y.py"
    ]  # fmt: skip


def test_the_checked_in_table_names_only_files_that_exist():
    root = fo.TABLE.parents[1]
    table = fo.load_table()
    assert table, "tests/file_durations.json is missing or empty"
    assert [f for f in table if not (root / f).is_file()] == []
