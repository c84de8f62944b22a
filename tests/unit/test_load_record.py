"""keystone-bench load: its settings are read once at the door, and load.json is built
from them (report/records.LoadRecord), each field from the part that holds it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.driver import targets
from rally_keystone_bench.report.records import LoadRecord
from rally_keystone_bench.verbs import load


def load_json(tmp_path, monkeypatch, *argv: str) -> tuple[dict, load.LoadSettings]:
    """load.json as ``load ARGV`` writes it before the load (none runs), and the
    settings the engine's run was given."""
    given = []
    monkeypatch.setattr(targets, "check_deployment", lambda *a, **k: None)  # no venv
    monkeypatch.setattr(load, "run_locust", lambda settings, *a: given.append(settings) or 0)
    monkeypatch.setattr(load, "run_rally", lambda settings, *a: given.append(settings) or 0)
    base = ["load", "--scenario", "validate", "--reports-dir", str(tmp_path)]
    assert cli.main([*base, *argv]) == 0
    (written,) = tmp_path.glob("*/load.json")
    (settings,) = given
    return json.loads(written.read_text()), settings


def test_the_engine_is_given_one_frozen_settings_object(tmp_path, monkeypatch):
    _, settings = load_json(tmp_path, monkeypatch, "--rate", "3")
    assert isinstance(settings, load.LoadSettings) and settings.probe.rate == 3.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.history = "elsewhere"  # type: ignore[misc]


@pytest.mark.parametrize(
    "argv, server, locust",
    [
        (["--locust-workers", "3"], 2, 3),  # Locust's workers are not the server's
        (["--locust-workers", "3", "--server-workers", "4"], 4, 3),
    ],
)
def test_a_local_keystones_workers_are_its_server_workers(
    tmp_path, monkeypatch, argv, server, locust
):
    doc, settings = load_json(tmp_path, monkeypatch, "--target", "local", *argv)
    assert (doc["deployment"]["workers"], doc["locust_workers"]) == (server, locust)
    assert settings.deployment is not None and settings.deployment.workers == server


def test_load_json_keeps_force_as_given_and_the_mocks_settings(tmp_path, monkeypatch):
    """On Rally the probe is always forced past the Locust ceiling (Rally's is checked
    apart); load.json says what was asked."""
    argv = ["--engine", "rally", "--mock-workers", "2", "--mock-service-time", "1.5"]
    doc, settings = load_json(tmp_path, monkeypatch, *argv)
    assert settings.probe.force and doc["force"] is False
    assert doc["engine"] == "rally" and doc["target"] == "mock" and doc["deployment"] is None
    assert doc["mock"] == {
        "workers": 2,
        "service_time_ms": 1.5,
        "stall_s": 0.0,
        "stall_every_s": 0.0,
    }


def test_a_records_field_comes_from_the_first_part_that_holds_it():
    @dataclasses.dataclass(frozen=True)
    class Part:
        scenario: str = "validate"
        force: bool = True
        rate: float = 2.0

    fields = [f.name for f in dataclasses.fields(LoadRecord)]
    first = dict.fromkeys(fields, "first")
    del first["scenario"], first["force"], first["machine"]
    record = LoadRecord.of(first, {"force": False}, Part())
    assert (record.scenario, record.force, record.rate) == ("validate", False, "first")
    assert record.machine is None  # held by none: its default
    with pytest.raises(TypeError):  # a field without a default that no part holds
        LoadRecord.of({"engine": "locust"})
