"""The gate's default task: every token path as its own named workload, memcached on."""

from __future__ import annotations

import types

import jinja2
import yaml
from fake_keystone import FakeKeystone, serving

from rally_keystone_bench import cli
from rally_keystone_bench.driver import workspace
from rally_keystone_bench.plugins.scenarios import paired
from rally_keystone_bench.verbs import gate, options


def _render(name: str, **args) -> dict:
    text = workspace.task_file(name).read_text()
    targets = {"baseline": "/a", "candidate": "/b"}
    targets.update(baseline_nocache="/a0", candidate_nocache="/b0")
    return yaml.safe_load(jinja2.Template(text).render(**targets, **args))


def deployments(args):
    """gate's side_deployments as its door calls them, from the parsed ARGS."""
    asked = options.read(gate.GateArgs, args)
    identity, conf = gate.IDENTITY.settings(args), gate.CONF.settings(args)
    return gate.side_deployments(asked, identity, conf, gate.TRACING.settings(args).trace)


def test_the_default_task_is_the_clouds_and_the_quick_one_stays_by_name() -> None:
    assert cli.build_parser().parse_args(["gate", "--baseline", "a", "--candidate", "b"]).task == (
        gate.CLOUD_TASK
    )
    cloud, quick = _render(gate.CLOUD_TASK), _render("tasks/gate.yaml")
    assert len(quick["subtasks"]) == 2
    titles = [s["title"] for s in cloud["subtasks"]]
    assert len(titles) == len(set(titles)) == 13  # a verdict per workload title
    seen = {
        (args["action"], args.get("path"), args.get("method", "-"), args.get("include_catalog"))
        for s in cloud["subtasks"]
        for args in [s["scenario"]["KeystoneTokens.paired"]]
    }
    assert {p for _, p, _, _ in seen} == set(paired.PATHS)
    assert ("validate", "password", "HEAD", None) in seen
    assert ("validate", "trust", "GET", False) in seen
    # 13 workloads of 18 s: 3.9 minutes of load per round
    durations = [s["runner"]["constant_for_duration"]["duration"] for s in cloud["subtasks"]]
    assert sum(durations) == 234


def test_the_cache_off_pass_validates_and_checks_on_the_second_pair() -> None:
    cloud = _render(gate.CLOUD_TASK)
    off = [
        s["scenario"]["KeystoneTokens.paired"]
        for s in cloud["subtasks"]
        if "cache off" in s["title"]
    ]
    assert [(a["method"], a["baseline"], a["candidate"]) for a in off] == [
        ("GET", "/a0", "/b0"),
        ("HEAD", "/a0", "/b0"),
    ]
    others = [s for s in cloud["subtasks"] if "cache off" not in s["title"]]
    assert {s["scenario"]["KeystoneTokens.paired"]["baseline"] for s in others} == {"/a"}


def test_every_workload_follows_the_seconds_the_gate_passes() -> None:
    """The budget: with 13 workloads the verdicts need 12 blocks of 2 s each (m <= 20
    at family alpha 0.01), 26 s a workload: 5.6 minutes of load, of the 12 minutes."""
    cloud = _render(gate.CLOUD_TASK, seconds=26)
    durations = [s["runner"]["constant_for_duration"]["duration"] for s in cloud["subtasks"]]
    assert durations == [26] * 13
    assert sum(durations) / 60 < 6


def test_the_cloud_task_lists_totp_in_both_sides_auth_methods_unless_a_side_says_otherwise():
    """Without it Keystone refuses the password + TOTP path; a side's own setting wins."""
    args = cli.build_parser().parse_args(
        ["gate", "--baseline", "keystone", "--candidate", "keystone"]
        + ["--candidate-option", "auth.methods=password,token"]
    )
    deps, _ = deployments(args)
    assert deps["baseline"].conf["auth.methods"].split(",")[-1] == "totp"
    assert deps["candidate"].conf["auth.methods"] == "password,token"
    quick = cli.build_parser().parse_args(
        ["gate", "--baseline", "keystone", "--candidate", "keystone", "--task", "tasks/gate.yaml"]
    )
    assert "auth.methods" not in deployments(quick)[0]["baseline"].conf


class _Recorder:
    def __init__(self) -> None:
        self.names: list[str] = []

    def __call__(self, name: str):
        import contextlib

        self.names.append(name)
        return contextlib.nullcontext()


def _openrc(tmp_path, url: str, name: str):
    path = tmp_path / name
    path.write_text(
        f"export OS_AUTH_URL={url}\nexport OS_USERNAME=admin\nexport OS_PASSWORD=pw\n"
        "export OS_PROJECT_NAME=admin\nexport OS_USER_DOMAIN_NAME=Default\n"
        "export OS_PROJECT_DOMAIN_NAME=Default\n"
    )
    return str(path)


def test_a_rescoped_pair_sends_one_timed_request_to_each_side(tmp_path) -> None:
    with serving(FakeKeystone()) as a, serving(FakeKeystone()) as b:
        timed = _Recorder()
        scenario = types.SimpleNamespace(_timer=lambda name: lambda: timed(name))
        sides = {"baseline": a, "candidate": b}
        creds = {s: paired.read_openrc(_openrc(tmp_path, k.url, s)) for s, k in sides.items()}
        for side in sides:  # the first pair also gets each side's token to rescope
            paired.Paired._issue(scenario, side, creds[side], "project", True, "token")
        before = {side: len(k.requests) for side, k in sides.items()}
        for side in sides:
            paired.Paired._issue(scenario, side, creds[side], "project", True, "token")
        # once set up, a pair is exactly one request to each side, each timed
        assert {s: len(k.requests) - before[s] for s, k in sides.items()} == {
            "baseline": 1,
            "candidate": 1,
        }
        assert a.requests[-1]["body"]["auth"]["identity"]["methods"] == ["token"]
        assert timed.names[-2:] == [
            "baseline.keystone.issue_token",
            "candidate.keystone.issue_token",
        ]


def test_each_path_validates_and_checks_with_one_timed_request(tmp_path) -> None:
    with serving(FakeKeystone()) as a:
        timed = _Recorder()
        scenario = types.SimpleNamespace(_timer=lambda name: lambda: timed(name))
        cred = paired.read_openrc(_openrc(tmp_path, a.url, "a"))
        for path in ("password", "token"):
            for method in ("GET", "HEAD"):
                paired.Paired._validate(scenario, "baseline", cred, path, method, False)
                before = len(a.requests)
                paired.Paired._validate(scenario, "baseline", cred, path, method, False)
                assert len(a.requests) - before == 1, (path, method)
                assert a.requests[-1]["method"] == method
        assert set(timed.names) == {
            "baseline.keystone.validate_token",
            "baseline.keystone.check_token",
        }
