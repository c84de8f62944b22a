"""deployment.json and identity.json: built by report/records.py from plain values, with
the lines ``run`` prints about them, and written byte for byte as before."""

from __future__ import annotations

from types import SimpleNamespace

from rally_keystone_bench.deploy import balancer, directory
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.report import records
from rally_keystone_bench.verbs import run


def test_format_counts_gives_each_nodes_share():
    assert records.format_counts({"node1": 3, "node2": 1}) == "node1 3 (75%), node2 1 (25%)"
    assert records.format_counts({"node1": 0, "node2": 0}) == "node1 0 (0%), node2 0 (0%)"
    assert records.format_counts({}) == ""


def test_deployment_record_without_nodes():
    record = records.deployment_record("main uwsgi 2x1 sqlite db on tmpfs", "tmpfs", "tmpfs")
    assert list(record.doc) == ["deployment", "db_storage", "db_device"]
    assert record.doc == {
        "deployment": "main uwsgi 2x1 sqlite db on tmpfs",
        "db_storage": "tmpfs",
        "db_device": "tmpfs",
    }
    assert record.lines == ["deployment: main uwsgi 2x1 sqlite db on tmpfs"]


def test_deployment_record_with_nodes():
    record = records.deployment_record(
        "main uwsgi 2x1 postgresql 2 nodes behind haproxy db on sda (SSD)",
        "disk",
        "sda (SSD)",
        {"node1": 60, "node2": 40},
    )
    assert list(record.doc) == ["deployment", "db_storage", "db_device", "token_requests_per_node"]
    assert record.doc["db_storage"] == "disk"
    assert record.doc["db_device"] == "sda (SSD)"
    assert record.doc["token_requests_per_node"] == {"node1": 60, "node2": 40}
    assert record.lines == [
        "deployment: main uwsgi 2x1 postgresql 2 nodes behind haproxy db on sda (SSD)",
        "token requests per node (access logs): node1 60 (60%), node2 40 (40%)",
    ]


def test_identity_record():
    record = records.identity_record(
        identity="ldap",
        ldap_settings="ldaps pool=off pool_size=5",
        ldap_pool=False,
        ldap_pool_size=5,
        ldap_auth_pool_size=None,
        ldap_tls=True,
        workers=4,
        connections=[
            ("tokens.yaml", [("issue tokens", 12), ("no window", None)]),
            ("users.yaml", [("list users", 0)]),
        ],
    )
    assert list(record.doc) == [
        "identity", "ldap", "ldap_pool", "ldap_pool_size", "ldap_auth_pool_size", "ldap_tls",
        "workers", "ldap_connections",
    ]  # fmt: skip
    assert record.doc == {
        "identity": "ldap",
        "ldap": "ldaps pool=off pool_size=5",
        "ldap_pool": False,
        "ldap_pool_size": 5,
        "ldap_auth_pool_size": None,
        "ldap_tls": True,
        "workers": 4,
        "ldap_connections": {"tokens.yaml": [12, None], "users.yaml": [0]},
    }
    assert record.lines == [
        "identity: ldaps pool=off pool_size=5, 4 worker processes",
        "    [1] issue tokens: slapd accepted 12 LDAP connections",
        "    [1] list users: slapd accepted 0 LDAP connections",
    ]


class _Described(Deployment):
    """A Deployment whose line is fixed and whose disk no lsblk is asked about."""

    def storage_device(self) -> str:
        return "tmpfs"

    def describe(self) -> str:
        return "a deployment"


def _deployment(**kw) -> Deployment:
    return _Described(**kw)


def test_run_writes_deployment_json_and_prints_its_lines(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(balancer, "requests_per_node", lambda d: {"node1": 2, "node2": 1})
    deployment = _deployment(db="postgresql", nodes=2, balancer="haproxy", db_storage="tmpfs")
    run.record_topology(deployment, tmp_path / "keystone", tmp_path)
    assert capsys.readouterr().out == (
        "deployment: a deployment\n"
        "token requests per node (access logs): node1 2 (67%), node2 1 (33%)\n"
    )
    assert (tmp_path / "deployment.json").read_text() == (
        "{\n"
        '  "deployment": "a deployment",\n'
        '  "db_storage": "tmpfs",\n'
        '  "db_device": "tmpfs",\n'
        '  "token_requests_per_node": {\n'
        '    "node1": 2,\n'
        '    "node2": 1\n'
        "  }\n"
        "}\n"
    )


def test_run_writes_identity_json_and_prints_its_lines(tmp_path, monkeypatch, capsys):
    workloads = [SimpleNamespace(label=lambda: "issue tokens"), SimpleNamespace(label=lambda: "x")]
    outcome = SimpleNamespace(task_file=tmp_path / "tokens.yaml", workloads=workloads)
    monkeypatch.setattr(directory, "count_load_accepts", lambda log, wls: {0: 7})
    deployment = _deployment(identity="ldap", ldap_pool=True, ldap_pool_size=3, workers=2)
    run.record_identity(deployment, [outcome], tmp_path / "slapd.log", tmp_path)
    assert capsys.readouterr().out == (
        "identity: ldap pool=on pool_size=3, 2 worker processes\n"
        "    [1] issue tokens: slapd accepted 7 LDAP connections\n"
    )
    assert (tmp_path / "identity.json").read_text() == (
        "{\n"
        '  "identity": "ldap",\n'
        '  "ldap": "ldap pool=on pool_size=3",\n'
        '  "ldap_pool": true,\n'
        '  "ldap_pool_size": 3,\n'
        '  "ldap_auth_pool_size": null,\n'
        '  "ldap_tls": false,\n'
        '  "workers": 2,\n'
        '  "ldap_connections": {\n'
        '    "tokens.yaml": [\n'
        "      7,\n"
        "      null\n"
        "    ]\n"
        "  }\n"
        "}\n"
    )
