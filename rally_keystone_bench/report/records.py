"""JSON records a verb keeps beside its reports: deployment.json, identity.json, load.json.

deployment.json and identity.json are built here, with the lines ``run`` prints
about them, from the plain values the verb gathers (the deployment's settings,
each node's token requests, slapd's accepted connections); every record is
written by write_json.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rally_keystone_bench import writer
from rally_keystone_bench.report.redact import redact


class Record(NamedTuple):
    """A record's JSON document and the lines a verb prints about it."""

    doc: dict[str, Any]
    lines: list[str]


def write_json(
    path: Path, doc: Any, *, indent: int | None = 2, default: Callable[[Any], Any] | None = None
) -> None:
    """DOC as JSON at PATH; indented records end with a newline."""
    writer.write_json(path, doc, indent=indent, newline=bool(indent), default=default)


def format_counts(counts: dict[str, int]) -> str:
    """``node1 120 (50%), node2 118 (50%)``: each node's token requests and its share."""
    total = sum(counts.values()) or 1
    return ", ".join(f"{n} {c} ({100 * c / total:.0f}%)" for n, c in counts.items())


def deployment_record(
    description: str,
    db_storage: str,
    db_device: str,
    token_requests_per_node: dict[str, int] | None = None,
) -> Record:
    """deployment.json: the deployment, its storage device and (with nodes, else None)
    the token requests each node served."""
    doc: dict[str, Any] = {
        "deployment": description,
        "db_storage": db_storage,
        "db_device": db_device,
    }
    lines = [f"deployment: {description}"]
    if token_requests_per_node is not None:
        doc["token_requests_per_node"] = token_requests_per_node
        lines.append(
            f"token requests per node (access logs): {format_counts(token_requests_per_node)}"
        )
    return Record(doc, lines)


def identity_record(
    *,
    identity: str,
    ldap_settings: str,
    ldap_pool: bool | None,
    ldap_pool_size: int | None,
    ldap_auth_pool_size: int | None,
    ldap_tls: bool,
    workers: int,
    connections: Sequence[tuple[str, Sequence[tuple[str, int | None]]]],
) -> Record:
    """identity.json: the LDAP settings and, per task file name, the LDAP connections slapd
    accepted during each workload's load.

    CONNECTIONS: (task file name, [(workload label, connections or None)]) per task, in
    order; None when a workload has no load window, and no line is printed for it.
    """
    doc: dict[str, Any] = {
        "identity": identity,
        "ldap": ldap_settings,
        "ldap_pool": ldap_pool,
        "ldap_pool_size": ldap_pool_size,
        "ldap_auth_pool_size": ldap_auth_pool_size,
        "ldap_tls": bool(ldap_tls),
        "workers": workers,
        "ldap_connections": {},
    }
    lines = [f"identity: {ldap_settings}, {workers} worker processes"]
    for task_name, workloads in connections:
        doc["ldap_connections"][task_name] = [count for _, count in workloads]
        for i, (label, count) in enumerate(workloads):
            if count is not None:
                lines.append(f"    [{i + 1}] {label}: slapd accepted {count} LDAP connections")
    return Record(doc, lines)


@dataclasses.dataclass(frozen=True)
class LoadRecord:
    """load.json: what a load was asked to do, one declared field each (never the command
    line's Namespace); written before the load, the machine's record added after it."""

    engine: str
    started_at: str
    scenario: str
    rate: float  # requests per second, the target
    duration: float  # seconds measured
    warmup: float
    target: str  # local, cloud or mock
    spec: str | None  # --target cloud: its Rally env spec file (None: the OS_* variables)
    locust_workers: int  # started on this host
    expect_workers: int  # started on other hosts
    users: int | None
    arrival: str
    http: str
    master_bind: str | None
    expect_timeout: float
    force: bool
    mock: dict[str, float] | None  # --target mock: its workers, service time and stalls
    deployment: dict[str, Any] | None  # --target local: the Keystone deployed
    machine: dict[str, Any] | None = None  # how busy the machine was during the load

    @classmethod
    def of(cls, *parts: Mapping[str, Any] | Any) -> LoadRecord:
        """The record whose every field is the value of the first of PARTS (a mapping, or
        a dataclass's fields) that holds its name; a field none holds keeps its default."""
        held = [p if isinstance(p, Mapping) else _fields_of(p) for p in parts]
        values = {}
        for f in dataclasses.fields(cls):
            part = next((h for h in held if f.name in h), None)
            if part is not None:
                values[f.name] = part[f.name]
        return cls(**values)

    def write(self, out_dir: Path) -> None:
        """OUT_DIR/load.json, passwords masked (report/redact.py)."""
        doc = redact(dataclasses.asdict(self))
        write_json(out_dir / "load.json", doc, indent=None, default=str)


def _fields_of(obj: Any) -> dict[str, Any]:
    """OBJ's dataclass fields by name (not deep-copied, as dataclasses.asdict would)."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
