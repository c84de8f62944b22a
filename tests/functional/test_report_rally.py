"""report by TASK_UUID and the keystone-bench-summary exporter, with the real rally CLI.

A report is imported into a Rally database of our own (`rally task import`),
so no Keystone is needed: `keystone-bench report UUID` and
`rally task export UUID --type keystone-bench-summary --to DIR` must then
write the same numbers as `keystone-bench report FILE`.
"""

import json
import sys
from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.driver.rally import UUID_RE, RallyHome

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import synthetic  # noqa: E402

pytestmark = pytest.mark.functional


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rally")
    rep = synthetic.report(
        [
            synthetic.workload(
                synthetic.iterations(80, concurrency=c, error_every=20, seed=c),
                runner={"times": 80, "concurrency": c},
            )
            for c in (1, 2)
        ]
    )
    src = synthetic.write(str(tmp / "result.json"), rep)
    home = RallyHome(tmp / "home")
    (tmp / "empty.json").write_text("{}")
    home.rally("env", "create", "--name", "empty", "--spec", str(tmp / "empty.json"), "--no-use")
    out = home.rally("task", "import", "--file", src, "--env", "empty")
    uuid = UUID_RE.search(out.stdout + out.stderr).group(0)
    assert cli.main(["report", src, "--out", str(tmp / "from-file")]) == 0
    return home, uuid, tmp


def _numbers(path: Path) -> list:
    return json.loads(path.read_text())["workloads"]


def test_report_by_task_uuid(imported, monkeypatch, capsys):
    home, uuid, tmp = imported
    monkeypatch.setenv("KEYSTONE_BENCH_RALLY_HOME", str(home.path))
    assert cli.main(["report", uuid, "--out", str(tmp / "by-uuid")]) == 0
    assert "summary.html" in capsys.readouterr().out
    by_uuid = _numbers(tmp / "by-uuid" / "summary.json")
    from_file = _numbers(tmp / "from-file" / "summary.json")
    assert [w["actions"] for w in by_uuid] == [w["actions"] for w in from_file]
    assert [w["throughput"] for w in by_uuid] == pytest.approx([w["throughput"] for w in from_file])


def test_unknown_task_uuid_exits_2(imported, monkeypatch, capsys):
    home, _, tmp = imported
    monkeypatch.setenv("KEYSTONE_BENCH_RALLY_HOME", str(home.path))
    missing = "00000000-0000-4000-8000-000000000000"
    assert cli.main(["report", missing, "--out", str(tmp / "none")]) == 2
    assert "rally task report" in capsys.readouterr().err


def test_rally_task_export_writes_the_same_summary(imported):
    home, uuid, tmp = imported
    dest = tmp / "exported"
    proc = home.rally("task", "export", uuid, "--type", "keystone-bench-summary", "--to", str(dest))
    assert proc.returncode == 0
    html = (dest / "summary.html").read_text()
    assert "<svg" in html and "<script" not in html
    exported = _numbers(dest / "summary.json")
    from_file = _numbers(tmp / "from-file" / "summary.json")
    assert [w["actions"] for w in exported] == [w["actions"] for w in from_file]


def test_exporter_is_listed_by_rally(imported):
    home, _, _ = imported
    out = home.rally("plugin", "show", "--name", "keystone-bench-summary").stdout
    assert "keystone-bench-summary" in out and "rally_keystone_bench.plugins.exporter" in out
