"""The nightly job samples (Zuul and GitHub): the token suite on Keystone master recorded
to a kept store, and the history page drawn from that same store as the artifact."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from rally_keystone_bench import cli
from rally_keystone_bench.verbs import history, run

ROOT = Path(__file__).resolve().parents[2]


def parsed(line: str):
    """The keystone-bench command LINE parsed by the real parser."""
    argv = shlex.split(line.split("keystone-bench", 1)[1])
    return cli.build_parser().parse_args(argv)


def commands(texts: list[str]) -> list:
    lines = []
    for text in texts:
        for part in re.split(r"\n(?=\S)", text.replace(">-", "")):
            if "keystone-bench " in part:
                part = re.sub(r"\{\{\s*(\w+)\s*\}\}", r"{{\1}}", part)  # one shell word
                lines.append(" ".join(part.split()))
    return [parsed(line) for line in lines]


def check(cmds: list, store: str, keystone: str, page: str) -> None:
    runs = [a for a in cmds if a.func is run.main]
    drawn = [a for a in cmds if a.func is history.main and a.html]
    (recorded,) = runs
    assert recorded.tasks == ["tasks/token-suite.yaml"] and (ROOT / recorded.tasks[0]).is_file()
    assert recorded.keystone == keystone  # master's checkout, not a release
    assert recorded.history == store
    (drawing,) = drawn
    assert drawing.history == store and drawing.changes and drawing.html == page
    exports = [a for a in cmds if a.func is history.main and a.export]
    assert [(a.export, a.history) for a in exports] == [("openmetrics", store)]


def test_zuul_nightly_records_master_to_the_kept_store_and_collects_the_page():
    jobs = [j["job"] for j in yaml.safe_load((ROOT / ".zuul.yaml").read_text())]
    job = next(j for j in jobs if j["name"] == "keystone-bench-nightly")
    keystone = next(p for p in job["required-projects"] if p["name"] == "openstack/keystone")
    assert keystone["override-checkout"] == "master"
    url = job["vars"]["keystone_bench_history"]
    assert url.startswith("postgresql://") and ":" not in url.split("://")[1].split("@")[0]
    # The password: the job's secret, as PGPASSWORD for the whole play, never in the URL.
    (secret,) = job["secrets"]
    play = yaml.safe_load((ROOT / job["run"]).read_text())[0]
    assert play["environment"]["PGPASSWORD"] == f"{{{{ {secret['name']}.password }}}}"
    tasks = play["tasks"]
    shells = [t["ansible.builtin.shell"]["cmd"] for t in tasks
              if isinstance(t.get("ansible.builtin.shell"), dict)]  # fmt: skip
    check(
        commands(shells),
        "{{keystone_bench_history}}",
        "{{keystone_dir}}",
        "{{logs_dir}}/history.html",
    )
    record = next(t for t in tasks if "run tasks/token-suite" in str(t))
    assert record["failed_when"] == f"{record['register']}.rc not in [0, 1]"


def test_github_nightly_keeps_its_store_between_nights_and_uploads_the_page():
    wf = yaml.safe_load((ROOT / ".github/workflows/keystone-nightly.yaml").read_text())
    assert wf[True]["schedule"][0]["cron"]  # yaml reads the key "on" as True
    steps = wf["jobs"]["nightly"]["steps"]
    keystone = next(s for s in steps if s.get("with", {}).get("repository") == "openstack/keystone")
    assert keystone["with"]["ref"] == "master" and keystone["with"]["fetch-depth"] == 0
    check(
        commands([s["run"] for s in steps if "run" in s]),
        "../history.sqlite",
        "../keystone",
        "../reports/history.html",
    )
    restore = next(s for s in steps if s.get("uses", "").startswith("actions/cache/restore"))
    save = next(s for s in steps if s.get("uses", "").startswith("actions/cache/save"))
    assert restore["with"]["path"] == save["with"]["path"] == "history.sqlite"
    assert restore["with"]["restore-keys"] and save["if"] == "always()"
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert "reports/history.html" in upload["with"]["path"]
