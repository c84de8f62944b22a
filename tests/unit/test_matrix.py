"""matrix: deployment files, the study table."""

import json
import sys
from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.deploy import directory
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.driver import outcome as task_outcome
from rally_keystone_bench.driver import task_reports
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.report import matrix as matrix_report
from rally_keystone_bench.verbs import matrix
from rally_keystone_bench.verdicts import results, rounds

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import synthetic  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_unknown_key_exits_2_naming_it(tmp_path, capsys):
    f = tmp_path / "d.yaml"
    f.write_text("one:\n  workers: 1\ntwo:\n  wrokers: 2\n")
    rc = cli.main(["matrix", "--deployments", str(f), "--task", "tasks/gate.yaml"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "'wrokers'" in err and "'two'" in err


def test_bad_value_is_refused(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("one:\n  server: tomcat\n")
    with pytest.raises(BenchError, match="tomcat"):
        matrix.load_deployments(str(f))


def test_values_get_their_field_types(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("one:\n  workers: '4'\n  password-hash-rounds: 5\n")
    dep = matrix.load_deployments(str(f))["one"]
    assert dep.workers == 4 and dep.password_hash_rounds == 5


@pytest.mark.parametrize("name", ["workers.yaml", "releases.yaml", "backends.yaml"])
def test_shipped_deployment_files_hold_known_keys_only(name):
    import yaml

    data = yaml.safe_load((ROOT / "deployments" / name).read_text())
    assert len(data) >= 4
    for dep_name, values in data.items():
        Deployment.from_mapping(values or {}, dep_name)


def test_workers_file_compares_1_2_and_4_workers_and_apache():
    deps = matrix.load_deployments(str(ROOT / "deployments" / "workers.yaml"))
    assert sorted(d.workers for d in deps.values() if d.server == "uwsgi") == [1, 2, 4]
    assert any(d.server == "apache" for d in deps.values())


def _workloads(concurrency: int, seed: int) -> list[results.Workload]:
    data = synthetic.iterations(30, concurrency=concurrency, seed=seed)
    wl = synthetic.workload(data, runner={"times": 30, "concurrency": concurrency})
    return results.from_report(synthetic.report([wl]))


def test_table_has_a_row_per_deployment_setting_and_action(tmp_path):
    rows = matrix.build_table([("uwsgi-1w", _workloads(4, 1)), ("uwsgi-2w", _workloads(4, 2))])
    keys = {(r["deployment"], r["setting"], r["action"]) for r in rows}
    assert ("uwsgi-1w", "concurrency 4", "keystone.issue_token") in keys
    assert ("uwsgi-2w", "concurrency 4", "total") in keys
    row = rows[0]
    for col in ("min", "avg", "max", "p90", "p95", "success_percent", "count", "throughput"):
        assert col in row
    assert row["min"] <= row["avg"] <= row["max"]
    html, js = matrix_report.write_report(rows, tmp_path, "tasks/x.yaml", {"uwsgi-1w": "keystone"})
    assert json.loads(js.read_text())["rows"][0]["deployment"] == "uwsgi-1w"
    assert "uwsgi-2w" in html.read_text()
    text = matrix_report.format_table(rows)
    assert "uwsgi-1w" in text and "p95" in text


def test_rows_name_the_workload_not_only_the_runner_setting():
    # The token-lifecycle task: serial create and serial validate share a runner setting.
    def wl(scenario, args, runner_type, runner, position):
        data = synthetic.iterations(10, concurrency=1, seed=position)
        return synthetic.workload(data, scenario, args, runner, runner_type, position=position)

    report = synthetic.report(
        [
            wl("KeystoneTokens.authenticate", {"scope": "project"}, "serial", {"times": 10}, 0),
            wl("KeystoneTokens.validate", {"method": "GET"}, "serial", {"times": 10}, 1),
            wl("KeystoneTokens.validate", {"method": "HEAD"}, "serial", {"times": 10}, 2),
        ]
    )
    rows = matrix.build_table([("ks", results.from_report(report))])
    totals = {r["setting"]: r["scenario"] for r in rows if r["action"] == "total"}
    assert totals == {
        "authenticate serial(times=10)": "KeystoneTokens.authenticate",
        "validate(method=GET) serial(times=10)": "KeystoneTokens.validate",
        "validate(method=HEAD) serial(times=10)": "KeystoneTokens.validate",
    }
    assert "validate(method=HEAD) serial(times=10)" in matrix_report.format_table(rows)


def test_a_deployment_that_fails_loses_no_other_results(tmp_path, monkeypatch, capsys):
    import contextlib

    from rally_keystone_bench.driver import targets

    f = tmp_path / "d.yaml"
    f.write_text("one:\n  workers: 1\nbroken:\n  workers: 2\nthree:\n  workers: 4\n")
    task = tmp_path / "t.json"
    task.write_text("{}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(targets, "build_envs", lambda deps: None)

    @contextlib.contextmanager
    def prepared_env(run_dir, deployment):
        if deployment.workers == 2:
            raise BenchError("Keystone exited during start; see its log")
        yield targets.ReadyEnv(None, "env", "http://x/v3")

    def run_task(home, env, task_file, task_args, out_dir):
        return task_outcome.TaskOutcome(task_file, "uuid", 0, workloads=_workloads(4, 1))

    monkeypatch.setattr(targets, "prepared_env", prepared_env)
    monkeypatch.setattr(task_reports, "run_task", run_task)
    code = cli.main(
        ["matrix", "--deployments", str(f), "--task", str(task), "--reports-dir", "reports"]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "1 of 3 deployment runs failed (broken)" in err
    (out,) = (tmp_path / "reports").iterdir()
    doc = json.loads((out / "matrix.json").read_text())
    assert {r["deployment"] for r in doc["rows"]} == {"one", "three"}
    assert "Keystone exited during start" in doc["failed"]["broken"]
    assert "Keystone exited during start" in (out / "matrix.html").read_text()


def test_ldap_rows_state_the_connections_slapd_accepted_during_the_load(tmp_path):
    wls = _workloads(4, 3)
    start, end = directory.load_window(wls[0])
    log = tmp_path / "slapd.log"

    def accept(at: float) -> str:
        sec = int(at)
        return f"{sec:08x}.{int((at - sec) * 1e9):08x} 0x7f ACCEPT from IP=127.0.0.1:1 (IP=x)\n"

    log.write_text(accept(start - 30) + accept(start + 0.01) + accept(end - 0.01) + accept(end + 5))
    counts = directory.count_load_accepts(log, wls)
    assert counts == {0: 2}  # setup's and teardown's connections are not the load's
    rows = matrix.build_table(
        [("ldap-pool-off", wls), ("sql", _workloads(4, 4))], {("ldap-pool-off", 0): 2}
    )
    assert {r["ldap_connections"] for r in rows if r["deployment"] == "ldap-pool-off"} == {2}
    assert all("ldap_connections" not in r for r in rows if r["deployment"] == "sql")
    text = matrix_report.format_table(rows)
    assert "ldap conns" in text and "slapd accepted" in text


def test_ldap_pools_file_compares_pools_off_and_on_plain_and_tls():
    import yaml

    data = yaml.safe_load((ROOT / "deployments" / "ldap-pools.yaml").read_text())
    deps = {name: Deployment.from_mapping(v, name) for name, v in data.items()}
    assert {(d.identity, d.ldap_pool, bool(d.ldap_tls)) for d in deps.values()} == {
        ("ldap", False, False),
        ("ldap", True, False),
        ("ldap", False, True),
        ("ldap", True, True),
    }


def test_yaml_on_off_and_true_become_pool_and_tls_booleans():
    dep = Deployment.from_mapping(
        {"identity": "ldap", "ldap_pool": False, "ldap_tls": "yes", "ldap_pool_size": "3"}, "d"
    )
    assert dep.ldap_pool is False and dep.ldap_tls is True and dep.ldap_pool_size == 3
    with pytest.raises(BenchError, match="on or off"):
        Deployment.from_mapping({"ldap_pool": "sometimes"}, "d")


def test_an_ldap_deployment_passes_its_domain_to_the_task():
    from rally_keystone_bench.deploy.deployment import Deployment
    from rally_keystone_bench.driver import targets

    ldap = Deployment(identity="ldap")
    assert targets.identity_task_args(ldap, {"times": 3}) == {"times": 3, "ldap_domain": "LDAP"}
    assert targets.identity_task_args(ldap, {"ldap_domain": "Corp"}) == {"ldap_domain": "Corp"}
    assert targets.identity_task_args(Deployment(), {"times": 3}) == {"times": 3}


def test_ldap_workers_file_measures_pools_on_at_1_2_and_4_workers():
    import yaml

    data = yaml.safe_load((ROOT / "deployments" / "ldap-workers.yaml").read_text())
    deps = [Deployment.from_mapping(v, name) for name, v in data.items()]
    assert sorted(d.workers for d in deps) == [1, 2, 4]
    assert all(d.identity == "ldap" and d.ldap_pool is True for d in deps)


def _row(deployment, setting, action, count, throughput, success=100.0):
    return {
        "deployment": deployment, "setting": setting, "action": action, "count": count,
        "throughput": throughput, "success_percent": success, "min": 0.1, "avg": 0.2,
        "max": 0.3, "p90": 0.25, "p95": 0.28, "scenario": "KeystoneTokens.x", "label": "x",
    }  # fmt: skip


def _release_rows():
    # Two releases, two rounds each: a serial token workload and one burst of 50.
    rows = []
    for name, rates in (("ks29", (3.45, 3.35)), ("ks30", (3.35, 3.43))):
        for k, rate in enumerate(rates, 1):
            dep = f"{name} (run {k})"
            rows += [
                _row(dep, "authenticate serial(times=10)", "total", 10, rate),
                _row(dep, "authenticate serial(times=10)", "keystone.issue_token", 10, rate),
                _row(dep, "burst serial(times=1)", "total", 1, 0.13 if k == 1 else 0.16),
                _row(dep, "burst serial(times=1)", "keystone.token_burst", 1, 0.13),
                _row(dep, "burst serial(times=1)", "keystone.issue_token", 50, 0.13),
            ]
    return rows


def test_repeated_rounds_give_requests_per_second_with_their_spread():
    summary = rounds.across_rounds(_release_rows())
    by = {(r["deployment"], r["setting"]): r for r in summary}
    assert set(by) == {
        ("ks29", "authenticate serial(times=10)"), ("ks29", "burst serial(times=1)"),
        ("ks30", "authenticate serial(times=10)"), ("ks30", "burst serial(times=1)"),
    }  # fmt: skip
    serial = by[("ks29", "authenticate serial(times=10)")]
    assert serial["action"] == "keystone.issue_token" and serial["rounds"] == 2
    assert serial["per_round"] == pytest.approx([3.45, 3.35])
    assert serial["requests_per_second"] == pytest.approx(3.40)
    assert (serial["min"], serial["max"]) == pytest.approx((3.35, 3.45))
    assert serial["spread_percent"] == pytest.approx(0.10 / 3.40 * 100)
    # A burst counts its 50 tokens, not the one iteration: 50 x 0.13 / 1 tokens/s.
    burst = by[("ks30", "burst serial(times=1)")]
    assert burst["action"] == "keystone.issue_token"
    assert burst["per_round"] == pytest.approx([6.5, 8.0])
    text = matrix_report.format_rounds(summary)
    assert "req/s" in text and "spread" in text
    line = next(li for li in text.splitlines() if li.startswith("ks29") and "authenticate" in li)
    assert line.split()[-5:] == ["2", "3.40", "3.35", "3.45", "2.9%"]


def test_failed_requests_do_not_count_as_requests_per_second():
    rows = [
        _row("ks", "validate concurrency 20", "total", 25, 4.0, success=80.0),
        _row("ks", "validate concurrency 20", "keystone.validate_token", 25, 4.0, success=80.0),
    ]
    (only,) = rounds.across_rounds(rows)
    assert only["rounds"] == 1 and only["requests_per_second"] == pytest.approx(3.2)


def test_matrix_html_draws_a_bar_per_deployment_with_the_rounds_range(tmp_path):
    rows = _release_rows()
    html, js = matrix_report.write_report(rows, tmp_path, "tasks/token-lifecycle.yaml", {})
    page = html.read_text()
    assert page.count("<svg") == 2  # one chart per workload
    assert page.count('class="bar"') == 4  # a bar per release in each
    assert page.count('class="whisker"') == 4  # rounds differ: each bar has its range
    assert "Across rounds" in page and "ks29" in page
    doc = json.loads(js.read_text())
    assert {r["deployment"] for r in doc["across_rounds"]} == {"ks29", "ks30"}


def test_one_round_draws_bars_without_a_range_and_no_rounds_table(tmp_path):
    rows = [r for r in _release_rows() if "(run 1)" in r["deployment"]]
    page = matrix_report.render_html(rows, "t", {})
    assert page.count('class="bar"') == 4
    assert 'class="whisker"' not in page
    assert "Across rounds" not in page
