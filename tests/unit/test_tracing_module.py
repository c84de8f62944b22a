"""The tracing module a traced Keystone imports, run on its own in a fresh interpreter.

Rendered from the template as a deployment writes it, then driven with real
SQLAlchemy, dogpile.cache and osprofiler (no Keystone): a connection kept
out of its pool shows in the store's count, and a cache region's operations
become trace points only inside a traced request.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from rally_keystone_bench.deploy import files, tracing


def _run(tmp_path: Path, body: str) -> str:
    files.write(tmp_path / "keystone_bench_tracing.py", "keystone_bench_tracing.py")
    script = tmp_path / "drive.py"
    script.write_text(textwrap.dedent(body))
    proc = subprocess.run(
        [sys.executable, str(script), str(tracing.store_path(tmp_path))],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_a_connection_kept_out_of_its_pool_is_counted(tmp_path):
    tracing.store_path(tmp_path).mkdir()
    out = _run(
        tmp_path,
        """
        import os, sys, sqlalchemy
        import keystone_bench_tracing as t
        t._count_checkouts(sys.argv[1])
        engine = sqlalchemy.create_engine("sqlite://")
        path = os.path.join(sys.argv[1], f"pool-{os.getpid()}.txt")
        with engine.connect() as c:
            c.exec_driver_sql("SELECT 1")
        print(open(path).read().strip())
        kept = engine.connect()  # a request that never gives it back
        print(open(path).read().strip())
        kept.close()
        print(open(path).read().strip())
        """,
    )
    assert out.split() == ["0", "1", "0"]


def test_cache_operations_are_traced_inside_a_traced_request_only(tmp_path):
    tracing.store_path(tmp_path).mkdir()
    out = _run(
        tmp_path,
        """
        import json, sys
        from dogpile.cache import make_region
        from osprofiler import notifier, profiler
        import keystone_bench_tracing as t
        points = []
        notifier.set(lambda info, **kw: points.append(info))
        region = make_region().configure("dogpile.cache.memory")
        region.wrap(t.CacheCounter)
        region.get("a")  # no trace: nothing recorded
        profiler.init("key", base_id="b")
        region.set("a", 1)
        region.get("a")
        region.get_multi(["a", "x", "y"])
        profiler.clean()
        print(json.dumps([{"name": p["name"], **p.get("info", {})} for p in points]))
        """,
    )
    points = [{k: v for k, v in p.items() if k != "host"} for p in json.loads(out)]
    assert points == [
        {"name": "cache-start", "cache": {"op": "set", "keys": 1}},
        {"name": "cache-stop"},
        {"name": "cache-start", "cache": {"op": "get", "keys": 1}},
        {"name": "cache-stop", "cache": {"misses": 0}},
        {"name": "cache-start", "cache": {"op": "get", "keys": 3}},
        {"name": "cache-stop", "cache": {"misses": 2}},
    ]


def test_lean_trace_points_carry_what_osprofilers_own_do(tmp_path):
    """The cheaper start/_notify: same names, paired ids, parent and base, a float time."""
    tracing.store_path(tmp_path).mkdir()
    out = _run(
        tmp_path,
        """
        import json, time
        from osprofiler import notifier, profiler
        import keystone_bench_tracing as t

        def points():
            got = []
            notifier.set(got.append)
            profiler.init("k", base_id="base")
            profiler.start("wsgi", info={"request": {"method": "GET"}})
            profiler.start("db", info={"db": {"statement": "SELECT 1"}})
            profiler.stop()
            profiler.stop()
            profiler.clean()
            return got

        own = points()
        before = time.time()
        t._lean_points()
        lean = points()
        print(json.dumps({"own": own, "lean": lean, "before": before}))
        """,
    )
    found = json.loads(out)
    own, lean = found["own"], found["lean"]
    assert [p["name"] for p in lean] == [p["name"] for p in own] == [
        "wsgi-start", "db-start", "db-stop", "wsgi-stop"]  # fmt: skip
    assert {p["base_id"] for p in lean} == {"base"}
    assert lean[1]["trace_id"] == lean[2]["trace_id"] != lean[0]["trace_id"] == lean[3]["trace_id"]
    assert lean[1]["parent_id"] == lean[0]["trace_id"]  # the statement is the request's child
    assert lean[0]["parent_id"] == own[0]["parent_id"] == "base"
    assert lean[1]["info"]["db"] == own[1]["info"]["db"] == {"statement": "SELECT 1"}
    stamps = [p["timestamp"] for p in lean]
    assert stamps == sorted(stamps) and stamps[0] >= found["before"]
    assert all(isinstance(p["timestamp"], str) for p in own)
