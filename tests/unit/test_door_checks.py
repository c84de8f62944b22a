"""Bad input is said once, at the door, with nothing made (issue 45, items 4, 5, 6, 9, 10).

A --set the Keystone refuses, a --keystone that is no requirement, an
option given where it does nothing: one line, exit 2, no false "Keystone
stopped", no run directory and nothing in the environments cache.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.deploy import conf_options, venv
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.errors import BenchError

TASK = "version: 2\ntitle: t\nsubtasks: [{title: s, scenario: {Dummy.dummy: {}}}]\n"
REGISTRY = {"token": {"provider": {"type": "String", "choices": ["fernet", "jws"]}}}


@pytest.fixture
def door(monkeypatch, tmp_path):
    """The working directory: TMP_PATH, with a task; a cached Keystone environment whose
    options are REGISTRY; starting a Keystone fails the test."""

    def refuse(*_a, **_k):
        raise AssertionError("a Keystone was started")

    env = tmp_path / "cache" / "env"
    monkeypatch.setattr(venv, "ensure_keystone_env", lambda *a, **k: env)
    monkeypatch.setattr(conf_options, "registry_of", lambda *a, **k: REGISTRY)
    monkeypatch.setattr(LocalKeystone, "start", refuse)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.yaml").write_text(TASK)
    return tmp_path


def one_line(capsys, argv: list[str]) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "Keystone stopped" not in err and "Traceback" not in err
    return err.strip()


def made(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name != "t.yaml")


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "t.yaml"],
        ["scale", "--dimension", "roles-per-user", "--values", "0,10"],
        ["load", "--scenario", "validate", "--target", "local", "--engine", "rally"],
    ],
    ids=["run", "scale", "load"],
)
@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ("nosuch.opt=1", "--set nosuch.opt: unknown section [nosuch]"),
        ("token.provider=pki", "--set token.provider=pki:"),
    ],
)
def test_a_rejected_set_is_one_line_and_makes_no_run_directory(capsys, door, argv, setting, said):
    err = one_line(capsys, [*argv, "--set", setting])
    assert said in err, err
    assert made(door) == []


def test_a_set_with_an_existing_cloud_names_set(capsys, door):
    err = one_line(capsys, ["run", "t.yaml", "--existing-cloud", "--set", "token.provider=jws"])
    assert err == (
        "keystone-bench: --set applies only to a local Keystone, not to --existing-cloud or --spec"
    )


def test_a_trace_rate_without_tracing_is_refused(capsys, door):
    err = one_line(capsys, ["run", "t.yaml", "--trace", "off", "--trace-rate", "0.5"])
    assert err == "keystone-bench: --trace-rate applies only to --trace on, not --trace off"


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("keystone>>=@@", "Keystone SPEC 'keystone>>=@@' is neither a pip requirement"),
        ("", "the Keystone SPEC is empty: give a pip requirement (keystone==30.0.0) or a"),
    ],
)
def test_a_bad_keystone_spec_is_one_line(capsys, door, spec, said):
    gate = [["gate", "--baseline", spec, "--candidate", "keystone==30.0.0"]] if spec else []
    for argv in (
        ["run", "t.yaml", "--keystone", spec],
        ["keystone", "up", "--keystone", spec],
        *gate,
    ):
        assert said in one_line(capsys, argv)
    assert made(door) == []


def test_a_spec_that_does_not_install_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    """keystone==0.0.0 resolves to nothing: no venv, no install log, no lock, and the
    error says why without pointing at a log that is gone."""
    monkeypatch.setattr(venv, "cache_root", lambda: tmp_path)
    monkeypatch.setattr(venv, "_make_venv", lambda path, log: path.mkdir(parents=True))

    def install(path, spec, log, progress):
        venv._run_logged(["sh", "-c", "echo 'error: no version of keystone==0.0.0'; false"],
                         log, f"install {spec}")  # fmt: skip

    monkeypatch.setattr(venv, "_install", install)
    with pytest.raises(BenchError) as caught:
        venv.ensure_keystone_env("keystone==0.0.0")
    assert str(caught.value) == "could not install keystone==0.0.0: no version of keystone==0.0.0"
    assert os.listdir(tmp_path / "venvs") == []


def test_a_size_beyond_the_machine_is_refused_unless_forced(capsys, door, monkeypatch):
    from rally_keystone_bench.deploy import limits

    monkeypatch.setattr(limits, "memory_mib", lambda: 24 * 1024)
    argv = ["scale", "--dimension", "roles-per-user", "--values", "0,1000000000000"]
    err = one_line(capsys, argv)
    assert err == (
        "keystone-bench: --values 1,000,000,000,000 roles per user: about 3,906,250,000 MiB "
        "at 4 KiB an item, more than half of this machine's 24576 MiB (--force to try anyway)"
    )
    assert made(door) == []
    # Within the bound, or forced: on to the next check (here a --set refused).
    for values in ("0,3000000", "0,1000000000000 --force"):
        words = values.split()
        argv = ["scale", "--dimension", "roles-per-user", "--values", *words, "--set", "x.y=1"]
        assert "--set x.y: unknown section" in one_line(capsys, argv)


def test_negative_worker_counts_are_refused_as_such(capsys):
    err = one_line(capsys, ["load", "--scenario", "validate", "--expect-workers", "-1"])
    assert "--expect-workers must be at least 0, not -1" in err


def test_a_history_directory_is_named_a_directory(capsys, tmp_path):
    err = one_line(capsys, ["history", "--history", str(tmp_path)])
    assert err == f"keystone-bench: --history {tmp_path}: is a directory, not a store file"


def test_what_a_mock_load_left_is_not_said_left_in_keystone(monkeypatch, tmp_path, capsys):
    """A mock killed under the load: the master could not delete its users there, but
    they went with the mock; only the run's own error is said."""
    import contextlib

    from rally_keystone_bench.engines.locust import engine
    from rally_keystone_bench.verbs import load
    from rally_keystone_bench.verbs.groups.target import MockSettings, TargetSettings
    from rally_keystone_bench.verdicts.probing import LoadRun

    @contextlib.contextmanager
    def target(*_a, **_k):
        yield {}, "mock"

    lost = LoadRun(tmp_path / "r.json", tmp_path, error="the mock stopped answering")
    lost.meta = {"left_behind": ["user kbl-1-0"]}
    monkeypatch.setattr(load, "admin_target", target)
    monkeypatch.setattr(load, "LocustProber", lambda *a, **k: None)
    monkeypatch.setattr(load, "probe_settings", lambda *a, **k: None)
    monkeypatch.setattr(load, "run_probe", lambda *a, **k: lost)
    monkeypatch.setattr(load, "summarize", lambda *a, **k: 0)
    settings = load.LoadSettings(
        "locust",
        engine.LoadSettings("validate", rate=1.0, duration=1.0),
        TargetSettings("mock", None, str(tmp_path), False),
        MockSettings(1, 5.0, 0.0, 0.0),
        None,
        None,
        None,
    )
    with pytest.raises(BenchError) as caught:
        load.run_locust(settings, load.LoadOutput(tmp_path, None), tmp_path)
    assert "left in Keystone" not in str(caught.value)
    assert "the mock stopped answering" in str(caught.value)
