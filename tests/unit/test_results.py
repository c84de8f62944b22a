"""results.py: Rally JSON reports read into arrays, and bad input refused."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verdicts import jsonstream, results

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import synthetic  # noqa: E402

FERNET = "gAAAAABmZ2u3" + "x" * 170


@pytest.fixture
def report_dict():
    auth = synthetic.iterations(60, error_every=20, seed=1)
    burst = synthetic.iterations(
        10,
        actions=["keystone.concurrent_burst"],
        nested={"keystone.concurrent_burst": ("keystone.issue_token", 5)},
        seed=2,
    )
    return synthetic.report(
        [
            synthetic.workload(auth),
            synthetic.workload(
                burst,
                scenario="KeystoneTokens.concurrent_create",
                args={"count": 5, "parallel": 5},
            ),
        ]
    )


@pytest.fixture
def report_path(tmp_path, report_dict):
    return synthetic.write(str(tmp_path / "r.json"), report_dict)


def test_load_gives_every_workload_with_its_samples(report_path):
    auth, burst = results.load(report_path)
    assert auth.scenario == "KeystoneTokens.authenticate"
    assert auth.runner_type == "constant" and auth.runner == {"times": 60, "concurrency": 2}
    assert auth.iterations == 60 and auth.failed_iterations == 3
    issue = auth.actions["keystone.issue_token"]
    assert issue.count == 60 and issue.failed.sum() == 3
    assert issue.success_percent == pytest.approx(95.0)
    assert list(auth.actions) == ["keystone.issue_token", "total"]
    # Each nested token request is a sample of its own.
    assert burst.actions["keystone.issue_token"].count == 50
    assert burst.actions["keystone.concurrent_burst"].count == 10


def test_durations_and_throughput_match_the_raw_data(report_path, report_dict):
    auth = results.load(report_path)[0]
    raw = report_dict["tasks"][0]["subtasks"][0]["workloads"][0]
    expected = [
        a["finished_at"] - a["started_at"] for it in raw["data"] for a in it["atomic_actions"]
    ]
    np.testing.assert_allclose(auth.actions["keystone.issue_token"].duration, expected)
    assert auth.throughput == pytest.approx(57 / raw["load_duration"])
    assert auth.actions["total"].count == 60


def test_errors_grouped_by_type_and_http_status(report_path):
    auth = results.load(report_path)[0]
    assert [(e.type, e.status, e.count) for e in auth.errors] == [("Unauthorized", 401, 3)]
    assert "req-…" in auth.errors[0].example  # request ids folded, so messages group


def test_tiny_chunks_give_the_same_arrays(report_path, monkeypatch):
    whole = results.load(report_path)
    monkeypatch.setattr(jsonstream.JsonStream, "CHUNK", 7)  # numbers and strings split across reads
    chunked = results.load(report_path)
    for a, b in zip(whole, chunked, strict=True):
        assert a.key() == b.key()
        for name in a.actions:
            np.testing.assert_array_equal(a.actions[name].duration, b.actions[name].duration)
        assert a.load_duration == b.load_duration


def test_from_report_matches_load(report_path, report_dict):
    a = results.load(report_path)
    b = results.from_report(report_dict)
    assert [w.key() for w in a] == [w.key() for w in b]
    np.testing.assert_array_equal(
        a[1].actions["keystone.issue_token"].duration, b[1].actions["keystone.issue_token"].duration
    )


@pytest.mark.parametrize(
    "content,reason",
    [
        ("", "empty file"),
        ("[]", "old 'rally task results' format"),
        ('{"foo": 1}', "not a Rally JSON report"),
        ('{"info": {"format_version": "2.0"}, "tasks": []}', "format_version 2.0"),
        (
            '{"info": {"format_version": "1.2"}, "tasks": [{"subtasks": [{"workloads": [{',
            "truncated",
        ),
        ('{"info": {"format_version": "1.2"}, "tasks": [} ', "a task is not an object"),
        ('{"info": {"format_version": "1.2"}, "tasks": []} trailing', "text after"),
        ("not json at all", "not a Rally JSON report"),
    ],
)
def test_bad_input_names_file_and_reason(tmp_path, content, reason):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(BenchError) as exc:
        results.load(p)
    assert str(p) in str(exc.value) and reason in str(exc.value)


def test_truncated_real_report_is_refused(tmp_path, report_path):
    text = Path(report_path).read_text()
    p = tmp_path / "cut.json"
    p.write_text(text[: len(text) // 2])
    with pytest.raises(BenchError, match="truncated"):
        results.load(p)


def test_iteration_without_timestamp_is_refused(tmp_path, report_dict):
    del report_dict["tasks"][0]["subtasks"][0]["workloads"][0]["data"][5]["timestamp"]
    p = synthetic.write(str(tmp_path / "r.json"), report_dict)
    with pytest.raises(BenchError, match="iteration 5 is not a Rally iteration"):
        results.load(p)


def test_binary_file_is_refused(tmp_path):
    p = tmp_path / "bin.json"
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(BenchError, match="not UTF-8"):
        results.load(p)


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(BenchError, match="cannot read"):
        results.load(tmp_path / "nope.json")


def test_error_messages_never_keep_a_token(tmp_path, report_dict):
    it = report_dict["tasks"][0]["subtasks"][0]["workloads"][0]["data"][19]
    it["error"][1] = f"Token {FERNET} is invalid (HTTP 404)"
    it["error"][0] = "TokenRequestError"
    p = synthetic.write(str(tmp_path / "r.json"), report_dict)
    groups = results.load(p)[0].errors
    text = json.dumps([g.example for g in groups], ensure_ascii=False)
    assert FERNET not in text and "gAAAAABm…" in text
    assert ("TokenRequestError", 404) in [(g.type, g.status) for g in groups]


def test_redact_hides_passwords_and_tokens():
    out = results.redact({"users": [{"password": "s3cret", "name": "u"}], "t": FERNET})
    assert out == {"users": [{"password": "***", "name": "u"}], "t": "gAAAAABm…"}


@pytest.mark.parametrize(
    "etype,msg,status",
    [
        ("TokenRequestError", "issue token: HTTP 401: The request you have made", 401),
        ("Unauthorized", "The request requires authentication. (HTTP 401)", 401),
        ("NotFound", "Could not find token", 404),
        ("ConnectFailure", "Unable to establish connection", None),
        ("HTTPError", "status code: 503", 503),
    ],
)
def test_http_status_read_from_error(etype, msg, status):
    assert results.http_status(etype, msg) == status


def test_task_uuid_recognised():
    assert results.is_task_uuid("6fd9a19f-5cf8-4904-8a16-5a6a0f2d3e5b")
    assert not results.is_task_uuid("result.json")


def test_window_throughput_averages_to_throughput(report_path):
    auth = results.load(report_path)[0]
    w = auth.window_throughput()
    assert w.size == 6
    assert w.mean() == pytest.approx(auth.throughput, rel=0.05)
