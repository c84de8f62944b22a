"""The Locust engine's Rally JSON report goes into Rally's database with ``rally task import``.

(A unit test in spirit, here because it runs the real rally CLI: about a minute.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "unit"))

from test_locust_samples import open_model_samples, report_of  # noqa: E402

from rally_keystone_bench.engines.locust import samples as sm  # noqa: E402
from rally_keystone_bench.verdicts import results  # noqa: E402


def test_rally_task_import_accepts_the_report(tmp_path):
    from rally_keystone_bench.driver.rally import RallyHome

    path = tmp_path / "locust.json"
    path.write_text(json.dumps(report_of(open_model_samples())))
    home = RallyHome(tmp_path / "rally")
    home.create_env(
        "fixtures",
        {
            "openstack": {
                "auth_url": "http://127.0.0.1:1/v3",
                "admin": {"username": "a", "password": "p", "project_name": "a"},
            }
        },
    )
    proc = home.rally(
        "task", "import", "--file", str(path), "--deployment", "fixtures", check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from rally_keystone_bench.driver.rally import UUID_RE

    task = UUID_RE.search(proc.stdout).group(0)
    out = tmp_path / "again.json"
    home.rally("task", "report", task, "--json", "--out", str(out))
    (wl,) = results.load(out)
    assert wl.iterations == 51 and wl.actions[sm.VALIDATE].has_response_time
