"""The revocation query Keystone sends on a validation: its plans and time, with and
without the indexes of Keystone 29.0.0 (bug 2081082).

Run with a Keystone environment's Python, on a Keystone run directory whose
database the gate's seeding filled (``rally_keystone_bench.deploy.seeding``)::

    $VENV/bin/python benchmarks/revocation_plans.py RUN_DIR/keystone.conf [--rounds 200]

It loads Keystone's own managers with that keystone.conf, builds the token
values of a project-scoped token of the admin (as ``build_token_values``
does), calls the SQL driver's ``list_events(token=...)``, the call every
validation makes, catches the statement it sends (SQLAlchemy's
``before_cursor_execute``), and prints the database's plan for it (SQLite
``EXPLAIN QUERY PLAN``, MySQL/MariaDB ``EXPLAIN``, PostgreSQL ``EXPLAIN
ANALYZE``) and the median time of the call, for a token older than every
event (a cloud's hour-old token) and one newer than every event, first with
the indexes as Keystone's migrations made them, then with the two indexes of
29.0.0 dropped (the reverse of its migration ``742c857f1dfb``), then again
with them made again. The indexes are back as they were at the end.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

try:  # Keystone's own code: only a Keystone environment's Python has it
    import keystone.conf
    import sqlalchemy
    from keystone.common import provider_api, sql
    from keystone.server import backends
except ImportError:  # main() says which Python to use
    keystone = None

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

NEW_INDEXES = {
    "ix_revocation_event_project_id_user_id": ("project_id", "user_id"),
    "ix_revocation_event_composite": ("issued_before", "user_id", "project_id", "audit_id"),
}


def load(conf_path: str):
    conf = keystone.conf.CONF
    keystone.conf.configure()
    sql.initialize()
    conf(args=[], project="keystone", default_config_files=[conf_path])
    backends.load_backends()
    return provider_api.ProviderAPIs


def token_values(apis, issued_at: datetime.datetime) -> dict:
    user = apis.identity_api.get_user_by_name("admin", "default")
    project = apis.resource_api.get_project_by_name("admin", "default")
    return {
        "issued_at": issued_at,
        "expires_at": issued_at + datetime.timedelta(hours=1),
        "audit_id": uuid.uuid4().hex[:22],
        "audit_chain_id": None,
        "user_id": user["id"],
        "identity_domain_id": "default",
        "project_id": project["id"],
        "assignment_domain_id": "default",
        "roles": [],
        "trust_id": None,
        "trustor_id": None,
        "trustee_id": None,
        "consumer_id": None,
        "access_token_id": None,
    }


def engine():
    with sql.session_for_read() as session:
        return session.get_bind()


def caught_statement(apis, values: dict):
    """(statement, parameters, rows) of the driver's list_events(token=VALUES)."""
    seen = []

    def listen(conn, cursor, statement, parameters, context, executemany):
        if "revocation_event" in statement:
            seen.append((statement, parameters))

    eng = engine()
    sqlalchemy.event.listen(eng, "before_cursor_execute", listen)
    try:
        rows = apis.revoke_api.driver.list_events(token=values)
    finally:
        sqlalchemy.event.remove(eng, "before_cursor_execute", listen)
    return seen[-1][0], seen[-1][1], len(rows)


def plan(statement: str, params) -> list[str]:
    eng = engine()
    prefix = {
        "sqlite": "EXPLAIN QUERY PLAN ",
        "mysql": "EXPLAIN ",
        "postgresql": "EXPLAIN (ANALYZE, BUFFERS) ",
    }[eng.dialect.name]
    with eng.connect() as conn:
        result = conn.exec_driver_sql(prefix + statement, params)
        keys = list(result.keys())
        lines = []
        for row in result:
            if eng.dialect.name == "mysql":
                r = dict(zip(keys, row, strict=True))
                lines.append(
                    f"type {r['type']}, key {r['key']}, rows {r['rows']}, Extra {r['Extra']}"
                )
            else:
                lines.append(str(row[-1]))
        return lines


def timed(apis, values: dict, rounds: int) -> float:
    """Median ms of the driver call over ROUNDS calls."""
    took = []
    for _ in range(rounds):
        start = time.perf_counter()
        apis.revoke_api.driver.list_events(token=values)
        took.append((time.perf_counter() - start) * 1000)
    return statistics.median(took)


def statement_alone(statement: str, params, rounds: int) -> float:
    """Median ms of the bare statement on one kept connection (no ORM, no Keystone)."""
    took = []
    with engine().connect() as conn:
        for _ in range(rounds):
            start = time.perf_counter()
            conn.exec_driver_sql(statement, params).fetchall()
            took.append((time.perf_counter() - start) * 1000)
    return statistics.median(took)


def set_indexes(present: bool) -> None:
    eng = engine()
    have = {i["name"] for i in sqlalchemy.inspect(eng).get_indexes("revocation_event")}
    with eng.begin() as conn:
        for name, cols in NEW_INDEXES.items():
            if present and name not in have:
                conn.exec_driver_sql(f"CREATE INDEX {name} ON revocation_event ({', '.join(cols)})")
            if not present and name in have:
                on = " ON revocation_event" if eng.dialect.name == "mysql" else ""
                conn.exec_driver_sql(f"DROP INDEX {name}{on}")
        analyse = {"sqlite": "ANALYZE", "mysql": "ANALYZE TABLE revocation_event"}
        conn.exec_driver_sql(analyse.get(eng.dialect.name, "ANALYZE revocation_event"))


def kinds() -> dict:
    with sql.session_for_read() as session:
        q = (
            "SELECT (user_id IS NOT NULL), (project_id IS NOT NULL), (audit_id IS NOT NULL), "
            "(audit_chain_id IS NOT NULL), (trust_id IS NOT NULL), COUNT(*) "
            "FROM revocation_event GROUP BY 1, 2, 3, 4, 5"
        )
        names = ("user", "project", "audit", "chain", "trust")
        return {
            "+".join(n for n, v in zip(names, row[:5], strict=True) if v) or "none": row[5]
            for row in session.execute(sqlalchemy.text(q))
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("conf")
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    if keystone is None:
        print("run with a Keystone environment's Python: $VENV/bin/python " + __file__)
        return 2
    apis = load(args.conf)
    eng = engine()
    print(f"machine: {_machine.describe()}")
    print(f"database: {eng.dialect.name} {eng.dialect.server_version_info}")
    print(f"events by the fields they carry: {json.dumps(kinds(), sort_keys=True)}")
    now = datetime.datetime.utcnow().replace(microsecond=0)
    tokens = {"older": now, "newer": now + datetime.timedelta(days=1)}
    for label, present in (("with", True), ("without", False), ("with, again", True)):
        set_indexes(present)
        print(f"== {label} the indexes of 29.0.0")
        for age, issued in tokens.items():
            statement, params, rows = caught_statement(apis, token_values(apis, issued))
            if label == "with" and age == "older":
                print("statement:", " ".join(statement.split()))
            ms = timed(apis, token_values(apis, issued), args.rounds)
            alone = statement_alone(statement, params, args.rounds)
            print(
                f"  token {age} than the events: {rows} events apply; {ms:.3f} ms median"
                f" (the statement alone: {alone:.3f} ms)"
            )
            for line in plan(statement, params):
                print("    " + line)
    set_indexes(True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
