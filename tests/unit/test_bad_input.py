"""Bad input never reaches a traceback: one line on stderr and exit 2.

Each case is one a user met: the reason is on stderr in one line, the exit
code is 2 (never 1, which means a verdict), and no traceback is printed.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.driver import workspace
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verbs import compare, matrix

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import synthetic  # noqa: E402

# A task Rally's format accepts (every verb checks it before anything starts).
TASK_TEXT = "version: 2\ntitle: t\nsubtasks: [{title: s, scenario: {Dummy.dummy: {}}}]\n"


def one_line_exit_2(capsys, argv, reason: str) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert reason in err, err
    return err


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    d = tmp_path_factory.mktemp("reports")
    rep = synthetic.report([synthetic.workload(synthetic.iterations(60, seed=1))])
    return synthetic.write(str(d / "base.json"), rep), rep


@pytest.mark.parametrize(
    "argv, reason",
    [
        (["compare"], "the following arguments are required"),
        (["nosuchverb"], "invalid choice"),
        (["mock", "--port", "70000"], "--port must be between 1 and 65535, not 70000"),
        (["mock", "--service-time", "nan"], "'nan' is not a finite number"),
        (["mock", "--service-time", "inf"], "'inf' is not a finite number"),
        (["mock", "--workers", "0"], "--workers must be at least 1"),
        (["keystone", "up", "--workers", "2.9"], "'2.9' is not an integer"),
        (["compare", "a", "b", "--threshold", "nan"], "'nan' is not a finite number"),
        (["gate", "--baseline", "a", "--candidate", "b", "--rounds", "0"], "--rounds must be"),
    ],
)
def test_usage_errors_are_one_line(capsys, argv, reason):
    one_line_exit_2(capsys, argv, reason)


def test_unexpected_error_names_its_type_and_debug_shows_the_traceback(capsys, monkeypatch):
    def broken(args):
        raise KeyError("surprise")

    monkeypatch.setattr(compare, "main", broken)
    err = one_line_exit_2(capsys, ["compare", "a", "b"], "unexpected error: KeyError")
    assert "--debug" in err
    assert cli.main(["compare", "a", "b", "--debug"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_url_passwords_are_masked_in_errors(capsys, monkeypatch):
    def broken(args):
        raise BenchError("auth URL http://admin:s3cret@example.test/v3 is unreachable")

    monkeypatch.setattr(compare, "main", broken)
    err = one_line_exit_2(capsys, ["compare", "a", "b"], "http://admin:***@example.test/v3")
    assert "s3cret" not in err


def test_output_into_a_closed_pipe_exits_quietly_with_the_verdict(reports):
    base, _ = reports
    tool = Path(sys.executable).parent / "keystone-bench"
    proc = subprocess.run(
        ["bash", "-c", f'"{tool}" compare "{base}" "{base}" | head -c 1; exit ${{PIPESTATUS[0]}}'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stderr == ""


def test_utf8_bom_report_is_read(tmp_path, reports, capsys):
    base, rep = reports
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(rep).encode())
    assert cli.main(["compare", base, str(bom)]) == 0


def test_nan_durations_are_refused(tmp_path, reports, capsys):
    base, rep = reports
    bad = json.loads(json.dumps(rep))
    bad["tasks"][0]["subtasks"][0]["workloads"][0]["data"][3]["duration"] = float("nan")
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(bad))  # json writes NaN, as a careless tool would
    one_line_exit_2(capsys, ["compare", base, str(path)], "not a finite number")


@pytest.mark.parametrize("flag", ["--json", "--html", "--junit"])
def test_output_into_a_missing_directory_is_refused(tmp_path, reports, capsys, flag):
    base, _ = reports
    out = tmp_path / "missing" / "out"
    one_line_exit_2(capsys, ["compare", base, base, flag, str(out)], "does not exist")
    assert not (tmp_path / "missing").exists()


def test_output_onto_a_directory_is_refused(tmp_path, reports, capsys):
    base, _ = reports
    one_line_exit_2(capsys, ["compare", base, base, "--html", str(tmp_path)], "is a directory")


@pytest.mark.parametrize("argv", [["keystone", "up"], ["mock"], ["keystone", "status"]])
def test_run_dir_that_is_a_file(tmp_path, capsys, argv):
    f = tmp_path / "afile"
    f.write_text("x")
    one_line_exit_2(capsys, [*argv, "--run-dir", str(f)], "is a file, not a directory")


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"pids": {"server": "x"}}'])
@pytest.mark.parametrize("action", ["status", "down"])
def test_corrupt_state_file(tmp_path, capsys, content, action):
    (tmp_path / "state.json").write_text(content)
    one_line_exit_2(capsys, ["keystone", action, "--run-dir", str(tmp_path)], "is corrupt")


def test_status_reason_is_on_stderr(tmp_path, capsys):
    assert cli.main(["keystone", "status", "--run-dir", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "no Keystone was started" in err


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"", "is empty"),
        (b"\x00\x01\x02binary", "is a binary file"),
        (b"\xff\xfe\xfd", "is not UTF-8 text"),
    ],
)
def test_unreadable_spec_files(tmp_path, capsys, content, reason):
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(content)
    one_line_exit_2(capsys, ["cleanup", "--reuse", "t1", "--spec", str(spec)], reason)


def test_missing_cleanup_spec(tmp_path, capsys):
    one_line_exit_2(
        capsys, ["cleanup", "--reuse", "t1", "--spec", str(tmp_path / "nope")], "does not exist"
    )


@pytest.mark.parametrize(
    "text, reason",
    [
        ("a: {workers: 2.9}", "workers must be an integer, not 2.9"),
        ("a: {workers: true}", "workers must be an integer, not True"),
        ("a: {keystone: null}", "keystone needs a value"),
        ("a: {server: [uwsgi]}", "server must be a word"),
        ("", "is empty"),
    ],
)
def test_deployment_file_values(tmp_path, text, reason):
    path = tmp_path / "d.yaml"
    path.write_text(text)
    with pytest.raises(BenchError, match=reason.replace("[", r"\[")):
        matrix.load_deployments(str(path))


def test_deployment_file_with_bom_is_read(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_bytes(b"\xef\xbb\xbfa: {workers: 3}\n")
    assert matrix.load_deployments(str(path))["a"].workers == 3


def test_report_with_a_missing_rally_home_does_not_create_it(tmp_path, capsys, monkeypatch):
    home = tmp_path / "no" / "home"
    monkeypatch.setenv("KEYSTONE_BENCH_RALLY_HOME", str(home))
    uuid = "12345678-1234-1234-1234-123456789012"
    one_line_exit_2(capsys, ["report", uuid], "KEYSTONE_BENCH_RALLY_HOME")
    assert not (tmp_path / "no").exists()


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path, monkeypatch):

    monkeypatch.setattr(workspace, "utc_stamp", lambda: "20260101T000000Z")
    first = workspace.new_run_dirs(tmp_path / "reports", tmp_path / "runs")
    second = workspace.new_run_dirs(tmp_path / "reports", tmp_path / "runs")
    assert first[0] != second[0] and first[1] != second[1]
    assert second[1].name == "20260101T000000Z-2"
    assert (second[1].stat().st_mode & 0o777) == 0o700


def test_rejected_spec_leaves_no_directories(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("tasks").mkdir()
    Path("tasks/t.yaml").write_text(TASK_TEXT)
    Path("spec.yaml").write_text("not: a spec\n")
    argv = ["run", "tasks/t.yaml", "--spec", "spec.yaml", "--reports-dir", "reports"]
    one_line_exit_2(capsys, argv, "has no openstack platform")
    for made in (Path("reports"), Path(".keystone-bench/runs")):
        assert not made.exists() or list(made.iterdir()) == []


def test_existing_cloud_url_password_is_never_echoed(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("t.yaml").write_text(TASK_TEXT)
    monkeypatch.setenv("OS_AUTH_URL", "http://admin:s3cret-pw@127.0.0.1:1/v3")
    monkeypatch.setenv("OS_USERNAME", "admin")
    monkeypatch.setenv("OS_PASSWORD", "other")
    monkeypatch.setenv("OS_PROJECT_NAME", "admin")
    err = one_line_exit_2(capsys, ["run", "t.yaml", "--existing-cloud"], "holds a user or password")
    assert "s3cret-pw" not in err


@pytest.mark.parametrize(
    "text, masked",
    [
        ("see http://admin:secret@host:5000/v3 now", "see http://admin:***@host:5000/v3 now"),
        ("postgresql+psycopg2://u:p%40ss@db/x", "postgresql+psycopg2://u:***@db/x"),
        ("http://host/v3 and https://h:1/", "http://host/v3 and https://h:1/"),
    ],
)
def test_mask_urls(text, masked):
    from rally_keystone_bench.boundary import mask_urls

    assert mask_urls(text) == masked


@pytest.mark.parametrize("signum, code", [(2, 130), (15, 143)])
def test_an_interrupted_verb_exits_128_plus_the_signal(capsys, monkeypatch, signum, code):
    from rally_keystone_bench.errors import Interrupted

    def interrupted(args):
        raise Interrupted(signum)

    monkeypatch.setattr(compare, "main", interrupted)
    assert cli.main(["compare", "a", "b"]) == code
    assert "interrupted by SIG" in capsys.readouterr().err
