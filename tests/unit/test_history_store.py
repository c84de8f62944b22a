"""The SQLite results store: records read back whole, migrations, two writers, a killed one."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rally_keystone_bench.deploy import identity
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.history import records
from rally_keystone_bench.history.store import SCHEMA_VERSION, Store
from rally_keystone_bench.verbs import recording

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_SUMMARY = ROOT / "tests" / "fixtures" / "golden" / "run.summary.json"


def report_dir(tmp_path: Path) -> Path:
    """A run's reports folder as `run` leaves it: one task's summary."""
    out = tmp_path / "reports" / "20261125T000000Z"
    (out / "token-suite-summary").mkdir(parents=True)
    (out / "token-suite-summary" / "summary.json").write_text(GOLDEN_SUMMARY.read_text())
    return out


def a_record(tmp_path: Path, deployment: str = "keystone uwsgi 2x1 sqlite") -> records.RunRecord:
    rows = records.rows_from_summaries(recording.summaries_under(report_dir(tmp_path), "run"))
    return records.build_record(
        "run", records.Keystone("keystone==30.0.0"), deployment,
        {"token.provider": "fernet"}, rows, "reports/x",
    )  # fmt: skip


def test_a_run_reads_back_with_the_summary_numbers_and_its_context(tmp_path):
    rec = a_record(tmp_path)
    with Store.open(str(tmp_path / "h.sqlite")) as store:
        run_id = store.record(rec)
        (run,) = store.runs()
    summary = json.loads(GOLDEN_SUMMARY.read_text())
    first = summary["workloads"][0]
    row = next(r for r in run["rows"] if r["action"] == "keystone.issue_token")
    assert run["id"] == run_id
    assert row["workload"] == f"token-suite#1 {first['scenario']}"
    assert row["p95"] == first["actions"]["keystone.issue_token"]["p95"]
    assert row["count"] == first["actions"]["keystone.issue_token"]["count"]
    assert len(run["rows"]) == sum(len(w["actions"]) for w in summary["workloads"])
    assert run["settings"] == {"token.provider": "fernet"}
    assert run["keystone"] == "keystone==30.0.0"
    assert run["cores"] == os.cpu_count()
    assert run["machine"].endswith(f"{os.cpu_count()} cores")


def test_filters_keep_the_runs_with_a_matching_row(tmp_path):
    with Store.open(str(tmp_path / "h.sqlite")) as store:
        store.record(a_record(tmp_path / "a", "keystone uwsgi 2x1 sqlite"))
        store.record(a_record(tmp_path / "b", "keystone gunicorn 2x1 sqlite"))
        assert [r["id"] for r in store.runs(deployment="gunicorn")] == [2]
        (run,) = store.runs(deployment="uwsgi", action="issue_token")
        assert {r["action"] for r in run["rows"]} == {"keystone.issue_token"}
        assert store.runs(workload="no such workload") == []


def test_an_old_store_migrates_and_keeps_its_runs(tmp_path):
    path = str(tmp_path / "h.sqlite")
    with Store.open(path, target=1) as store:
        assert store.version() == 1
        store.execute(
            "INSERT INTO runs (recorded_at, verb, machine)"
            " VALUES ('2026-01-01T00:00:00Z', 'run', 'm')"
        )
        store.execute(
            "INSERT INTO results (run_id, workload, action, p50) VALUES (1, 'w', 'total', 0.1)"
        )
        with pytest.raises(sqlite3.OperationalError):  # version 1 has no counters yet
            store.execute("SELECT counters FROM results")
    with Store.open(path) as store:
        assert store.version() == SCHEMA_VERSION
        (old,) = store.runs()
        assert old["rows"] == [
            {"workload": "w", "action": "total", "p50": 0.1, "p95": None, "p99": None,
             "rate": None, "success_percent": None, "count": None, "cpu_per_request": None,
             "counters": None}
        ]  # fmt: skip
        store.record(a_record(tmp_path))
        assert len(store.runs()) == 2


def test_a_store_newer_than_the_tool_is_refused(tmp_path):
    path = tmp_path / "h.sqlite"
    Store.open(str(path)).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_version SET version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(BenchError, match="schema version 99"):
        Store.open(str(path))


def test_a_file_that_is_not_a_store_is_refused(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("not a database\n" * 100)
    with pytest.raises(BenchError, match="not a SQLite store"):
        Store.open(str(other))
    with pytest.raises(BenchError, match="no directory"):
        Store.open(str(tmp_path / "missing" / "h.sqlite"))


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from rally_keystone_bench.history import records
    from rally_keystone_bench.history.store import Store
    from rally_keystone_bench.verbs import recording
    import time
    store_path, reports, count, tag = sys.argv[1:5]
    stall = int(sys.argv[5]) if len(sys.argv) > 5 else -1  # the run to hold mid-way
    summaries = recording.summaries_under(Path(reports), "run")
    rows = records.rows_from_summaries(summaries) * 40  # a fat run: a long transaction
    for i in range(int(count)):
        rec = records.build_record("run", records.Keystone(tag), tag, {}, rows, str(i))
        with Store.open(store_path) as store:
            if i == stall:  # say "mid" after 100 result rows, inside the transaction; wait
                plain, seen = store.execute, []
                def execute(text, params=()):
                    cur = plain(text, params)
                    if text.startswith("INSERT INTO results"):
                        seen.append(1)
                        if len(seen) == 100:
                            print("mid", flush=True)
                            time.sleep(600)
                    return cur
                store.execute = execute
            store.record(rec)
        print(i, flush=True)
    """
)


def writer(store: Path, reports: Path, count: int, tag: str, stall: int = -1) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(store), str(reports), str(count), tag, str(stall)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def test_two_writers_at_once_both_land(tmp_path):
    store, reports = tmp_path / "h.sqlite", report_dir(tmp_path)
    procs = [writer(store, reports, 15, tag) for tag in ("A", "B")]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    rows_per_run = len(records.rows_from_summaries(recording.summaries_under(reports, "run"))) * 40
    with Store.open(str(store)) as s:
        runs = s.runs()
    assert sorted(r["keystone"] for r in runs) == ["A"] * 15 + ["B"] * 15
    assert {len(r["rows"]) for r in runs} == {rows_per_run}


def test_a_killed_writer_leaves_the_store_readable_and_every_run_whole(tmp_path):
    """SIGKILL once the writer has committed three runs and says it is mid-way through the
    fourth: 100 of its rows written inside the open transaction. No timing involved."""
    store, reports = tmp_path / "h.sqlite", report_dir(tmp_path)
    proc = writer(store, reports, 1000, "K", stall=3)
    for expected in ("0", "1", "2", "mid"):
        assert proc.stdout.readline().strip() == expected, proc.stderr.read()[-2000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    rows_per_run = len(records.rows_from_summaries(recording.summaries_under(reports, "run"))) * 40
    conn = sqlite3.connect(store)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    (n_runs,) = conn.execute("SELECT count(*) FROM runs").fetchone()
    (n_rows,) = conn.execute("SELECT count(*) FROM results").fetchone()
    assert n_rows == n_runs * rows_per_run  # no half run left behind
    conn.close()
    with Store.open(str(store)) as s:
        runs = s.runs()
        assert len(runs) == 3  # the fourth, killed mid-way, left nothing
        assert {len(r["rows"]) for r in runs} == {rows_per_run}
        s.record(a_record(tmp_path / "after"))  # and the next writer still writes
        assert len(s.runs()) == len(runs) + 1


def test_the_deployment_line_leaves_the_keystone_to_its_own_column():
    """A nightly of master (a checkout, or each night's git-commit: spec) stays one series."""
    from rally_keystone_bench.deploy.deployment import Deployment

    lines = set()
    for spec in ("keystone==30.0.0", "/src/keystone", "git-commit:/src/keystone@" + "a" * 40):
        dep = Deployment(keystone=spec, password_hash_rounds=4)
        lines.add(identity.deployment_line(dep.describe(), spec))
    (line,) = lines
    assert line.startswith("uwsgi 2x1 sqlite rounds=4")


def test_capacity_records_n_as_the_rate_of_a_row_of_its_own(tmp_path):
    from rally_keystone_bench.verbs import capacity as capacity_verb
    from rally_keystone_bench.verdicts import capacity, probe_verdict

    settings = capacity.Settings("validate", 1, 100, 10, 30, 0.01, 1)
    probes = [probe_verdict.Probe(1, "search", 50.0), probe_verdict.Probe(2, "confirm N", 42.0)]
    row = capacity_verb.capacity_row(settings, capacity.Outcome(42.0, "found", probes=probes))
    rec = records.build_record("capacity", records.Keystone("keystone"), "d", {}, [row], "x")
    with Store.open(str(tmp_path / "h.sqlite")) as store:
        store.record(rec)
        ((stored,),) = [r["rows"] for r in store.runs(action="capacity")]
    assert stored["rate"] == 42.0 and stored["count"] == 2
    assert stored["workload"] == f"capacity {settings.rally_scenario} (rally)"


def test_a_checkout_is_recorded_by_commit_and_describe_and_the_commits_between_named(tmp_path):
    repo = tmp_path / "keystone"
    repo.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip

    git("init", "-q")
    git("commit", "-q", "--allow-empty", "-m", "first")
    git("tag", "30.0.0")
    older = recording.keystone_of(str(repo))
    git("commit", "-q", "--allow-empty", "-m", "Cache the role assignments")
    git("commit", "-q", "--allow-empty", "-m", "Add a second hash round")
    newer = recording.keystone_of(str(repo))
    assert older.describe == "30.0.0" and newer.describe.startswith("30.0.0-2-g")
    assert newer.commit == git("rev-parse", "HEAD") and newer.repo == str(repo)
    old_run = {"keystone_commit": older.commit, "keystone_repo": older.repo}
    new_run = {"keystone_commit": newer.commit, "keystone_repo": newer.repo}
    between = records.commits_between(old_run, new_run)
    assert [c.split(" ", 1)[1] for c in between] == [
        "Add a second hash round",
        "Cache the role assignments",
    ]
    assert records.commits_between(new_run, new_run) == []
    assert recording.keystone_of("keystone==1.0").commit is None


def test_a_verb_records_its_reports_under_its_deployment_line(tmp_path, monkeypatch, capsys):
    """What run/scale/load call once their reports are written (verbs/options.py)."""
    import argparse

    from rally_keystone_bench.deploy.deployment import Deployment
    from rally_keystone_bench.verbs import options

    out = report_dir(tmp_path)
    dep = Deployment(password_hash_rounds=4, conf={"token.provider": "jws"})
    monkeypatch.setenv("KEYSTONE_BENCH_HISTORY", str(tmp_path / "env.sqlite"))
    args = argparse.Namespace(history=None)  # the environment names the store
    kept = recording.summaries_under(out, "run")  # what run held in memory as it wrote them
    assert options.record_history(options.history_url(args.history), "run", out, dep, kept) == 1
    assert "history: run 1 recorded in" in capsys.readouterr().out
    with Store.open(str(tmp_path / "env.sqlite")) as store:
        (run,) = store.runs()
    assert run["deployment"] == identity.deployment_line(dep.describe(), dep.keystone)
    assert "rounds=4" in run["deployment"] and not run["deployment"].startswith("keystone")
    assert run["settings"] == {"token.provider": "jws"} and run["verb"] == "run"
    assert (
        options.record_history(options.history_url(args.history), "run", tmp_path / "empty", dep)
        is None
    )  # no summary
    monkeypatch.delenv("KEYSTONE_BENCH_HISTORY")
    assert (
        options.record_history(options.history_url(args.history), "run", out, dep, kept) is None
    )  # no store: nothing to do


def test_a_secret_given_with_set_is_stored_masked(tmp_path, capsys):
    """--set ldap.password=... or a database.connection URL never reaches the store."""
    import argparse

    from rally_keystone_bench.deploy.deployment import Deployment
    from rally_keystone_bench.verbs import options

    store = tmp_path / "h.sqlite"
    conf = {
        "ldap.password": "s3cret-bind",
        "database.connection": "postgresql://ks:dbpass@127.0.0.1/ks",
        "token.provider": "fernet",
    }
    dep = Deployment(password_hash_rounds=4, conf=conf)
    args = argparse.Namespace(history=str(store))
    out = report_dir(tmp_path)
    kept = recording.summaries_under(out, "run")
    assert options.record_history(options.history_url(args.history), "run", out, dep, kept) == 1
    with Store.open(str(store)) as s:
        (run,) = s.runs()
    assert run["settings"] == {
        "ldap.password": "***",
        "database.connection": "***",
        "token.provider": "fernet",
    }
    raw = store.read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("h.sqlite-*"))
    assert b"s3cret-bind" not in raw and b"dbpass" not in raw


def test_a_store_that_fails_at_the_end_keeps_the_verbs_verdict(tmp_path, capsys):
    """The store is checked at the door; should it fail after the load, the verb's exit code
    stands and stderr says the run was not recorded (with no password)."""
    import argparse

    from rally_keystone_bench.verbs import options

    args = argparse.Namespace(history="postgresql://u:pw@127.0.0.1:1/none")
    out = report_dir(tmp_path)
    kept = recording.summaries_under(out, "run")
    assert options.record_history(options.history_url(args.history), "run", out, None, kept) is None
    err = capsys.readouterr().err
    assert err.startswith("history: NOT recorded:") and "pw@" not in err


def test_another_programs_sqlite_database_is_not_filled(tmp_path):
    other = tmp_path / "rally.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE tasks (uuid TEXT)")
    with pytest.raises(BenchError, match="not a keystone-bench history store"):
        Store.open(str(other))
    with sqlite3.connect(other) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert tables == {"tasks"}


def test_a_password_in_the_store_url_is_never_shown():
    from rally_keystone_bench.history.store import _redacted

    assert _redacted("postgresql://bench:pw1@db/h") == "postgresql://bench:***@db/h"
    assert _redacted("postgresql://db/h?user=b&password=pw2&sslmode=require") == (
        "postgresql://db/h?user=b&password=***&sslmode=require"
    )


def _open_at_once(path: str, barrier, errors) -> None:
    barrier.wait()
    try:
        with Store.open(path):
            pass
    except BaseException as exc:  # noqa: BLE001  (reported to the test)
        errors.put(repr(exc))


def test_writers_opening_a_new_store_at_once_all_open_it(tmp_path):
    """Switching a new file to WAL answers "database is locked" at once to the second
    opener (seen 5 times in 180 opens before the retry); 20 rounds of 3 openers."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    errors = ctx.Queue()
    for i in range(20):
        barrier = ctx.Barrier(3)
        path = str(tmp_path / f"h{i}.sqlite")
        procs = [ctx.Process(target=_open_at_once, args=(path, barrier, errors)) for _ in "abc"]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120)
            assert p.exitcode == 0
    assert errors.empty(), errors.get()


def test_a_verb_hands_over_the_summaries_it_kept_and_no_file_is_read_back(tmp_path, capsys):
    """What a verb records is the summary documents it held when report/ wrote them, named
    as their folders name them: with every summary.json gone, the same rows are recorded."""
    import argparse

    from rally_keystone_bench.verbs import options

    out = report_dir(tmp_path)
    on_disk = recording.summaries_under(out, "run")
    doc = json.loads(GOLDEN_SUMMARY.read_text())
    point = out / "point-10" / "data-sizes-summary"
    written = [(point / "summary.html", doc), (out / "token-suite-summary" / "summary.html", doc)]
    kept = recording.summaries_of(written, out, "run")
    assert [name for name, _ in kept] == ["point-10/data-sizes", "token-suite"]
    assert kept[1] == on_disk[0]
    for path in out.rglob("summary.json"):
        path.unlink()
    args = argparse.Namespace(history=str(tmp_path / "h.sqlite"))
    assert options.record_history(options.history_url(args.history), "run", out, None, kept) == 1
    with Store.open(str(tmp_path / "h.sqlite")) as store:
        (run,) = store.runs()
    expected = records.rows_from_summaries(kept)
    assert len(run["rows"]) == len(expected) == 2 * len(records.rows_from_summaries(on_disk))
