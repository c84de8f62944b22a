"""The keystone-bench command: argument parsing and dispatch to the verbs.

Every verb exits 0 on pass, 1 when a verdict failed (SLA, regression,
degradation) and 2 on bad input or environment, with a one-line reason on
stderr. Each verb is a function of a module under verbs/.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import rally_keystone_bench.verbs.capacity
import rally_keystone_bench.verbs.cleanup
import rally_keystone_bench.verbs.compare
import rally_keystone_bench.verbs.gate
import rally_keystone_bench.verbs.keystone
import rally_keystone_bench.verbs.load
import rally_keystone_bench.verbs.matrix
import rally_keystone_bench.verbs.mock
import rally_keystone_bench.verbs.report
import rally_keystone_bench.verbs.run
import rally_keystone_bench.verbs.scale
import rally_keystone_bench.verbs.tasks  # noqa: F401  (each verb module, as verbs.NAME)
from rally_keystone_bench import boundary, errors, verbs


def _add_deployment_options(p: argparse.ArgumentParser, workers: bool = True) -> None:
    """Options that describe a local Keystone deployment (``load`` names its
    server workers --server-workers: its --workers are Locust's)."""
    p.add_argument(
        "--port", type=boundary.port, default=None, help="loopback port (default: a free one)"
    )
    if workers:
        p.add_argument(
            "--workers",
            type=boundary.positive_int,
            default=None,
            help="server worker processes (default 2)",
        )
    p.add_argument(
        "--threads", type=boundary.positive_int, default=None, help="threads per worker (default 1)"
    )
    p.add_argument(
        "--keystone",
        metavar="SPEC",
        default=None,
        help="pip requirement (keystone==30.0.0) or a local checkout path "
        "(default: the newest release)",
    )
    p.add_argument(
        "--server",
        choices=["uwsgi", "gunicorn", "apache", "nginx"],
        default=None,
        help="WSGI server (default uwsgi; nginx: nginx in front of uWSGI)",
    )
    p.add_argument(
        "--db",
        choices=["sqlite", "postgresql", "mysql"],
        default=None,
        help="database backend (default sqlite)",
    )
    p.add_argument(
        "--db-url",
        default=None,
        help="server URL for postgresql/mysql; a fresh database is created there "
        "and dropped at teardown",
    )
    p.add_argument(
        "--cache",
        choices=["none", "memcached"],
        default=None,
        help="oslo.cache backend (default none)",
    )
    p.add_argument(
        "--db-storage",
        choices=["disk", "tmpfs"],
        default=None,
        help="where the database's files live: disk (default) or tmpfs (/dev/shm; "
        "postgresql gets a private server there)",
    )
    p.add_argument(
        "--nodes",
        type=int,
        default=None,
        metavar="N",
        help="N Keystone servers sharing database and keys, behind --balancer",
    )
    p.add_argument(
        "--balancer",
        choices=["haproxy"],
        default=None,
        help="load balancer in front of --nodes on the auth URL's port (default with --nodes: "
        "haproxy)",
    )
    p.add_argument(
        "--password-hash-rounds",
        type=boundary.number_in(4, 31, int),
        default=None,
        metavar="R",
        help="bcrypt rounds for new passwords (default: upstream's)",
    )
    p.add_argument(
        "--request-timeout",
        type=boundary.number_in(1, 3600, int),
        default=None,
        metavar="S",
        help="the server gives up on a worker silent this long, e.g. one that died "
        "mid-request: uWSGI's router and nginx answer 502, gunicorn and Apache restart "
        "the worker (default 35 s: above SQLite's 30 s busy timeout)",
    )
    _add_identity_options(p)


def _on_off(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"must be on or off, not {text!r}")
    return value == "on"


def _add_identity_options(p: argparse.ArgumentParser) -> None:
    """Where Keystone's users live: SQL, or a local LDAP directory (slapd)."""
    p.add_argument(
        "--identity",
        choices=["sql", "ldap"],
        default=None,
        help="identity backend of the load's users: sql (default), or ldap: a local slapd "
        "whose users live in a domain of their own (admin stays in SQL)",
    )
    p.add_argument(
        "--ldap-pool",
        type=_on_off,
        default=None,
        metavar="on|off",
        help="Keystone's LDAP connection pools: sets use_pool and use_auth_pool "
        "(default: Keystone's, on)",
    )
    p.add_argument("--ldap-pool-size", type=int, default=None, metavar="N", help="[ldap] pool_size")
    p.add_argument(
        "--ldap-auth-pool-size", type=int, default=None, metavar="N", help="[ldap] auth_pool_size"
    )
    p.add_argument(
        "--ldap-tls",
        action="store_true",
        default=None,
        help="serve ldaps:// with a certificate made for the run",
    )
    p.add_argument("--ldap-port", type=int, default=None, help="slapd's port (default: a free one)")
    p.add_argument(
        "--ldap-users",
        type=int,
        default=None,
        metavar="N",
        help="users in the directory (default 8)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = boundary.OneLineParser(
        prog="keystone-bench",
        description="Benchmark OpenStack Keystone tokens with Rally.",
    )
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of an unexpected error"
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True

    # keystone up | down | status
    ks = sub.add_parser("keystone", help="start, stop or inspect a local Keystone")
    ks_sub = ks.add_subparsers(dest="action", metavar="ACTION")
    ks_sub.required = True
    up = ks_sub.add_parser("up", help="start a local Keystone and write RUN_DIR/openrc")
    _add_deployment_options(up)
    up.add_argument("--run-dir", default=None, help="where config, logs and openrc go")
    up.set_defaults(func=verbs.keystone.keystone_up)
    down = ks_sub.add_parser("down", help="stop the local Keystone, keep its logs")
    down.add_argument("--run-dir", default=None)
    down.set_defaults(func=verbs.keystone.keystone_down)
    status = ks_sub.add_parser("status", help="say whether the local Keystone answers")
    status.add_argument("--run-dir", default=None)
    status.set_defaults(func=verbs.keystone.keystone_status)

    # mock
    mock = sub.add_parser("mock", help="a minimal, fast token service on loopback")
    mock.add_argument("--port", type=boundary.port, default=None)
    mock.add_argument("--workers", type=boundary.positive_int, default=1)
    mock.add_argument(
        "--service-time",
        type=boundary.non_negative,
        default=0.0,
        metavar="MS",
        help="fixed service time per request, in ms",
    )
    mock.add_argument(
        "--slope",
        type=boundary.number_in(),
        default=0.0,
        metavar="K",
        help="latency grows by K ms every second",
    )
    mock.add_argument(
        "--error-rate",
        type=boundary.fraction,
        default=0.0,
        help="fraction of token requests answered with HTTP 500",
    )
    mock.add_argument(
        "--stall",
        type=boundary.non_negative,
        default=0.0,
        metavar="SECONDS",
        help="every worker stops answering token requests for this long (needs --stall-every)",
    )
    mock.add_argument(
        "--stall-every",
        type=boundary.non_negative,
        default=0.0,
        metavar="SECONDS",
        help="seconds from one stall to the next; the first starts this long after start",
    )
    mock.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    mock.add_argument("--run-dir", default=None)
    mock.set_defaults(func=verbs.mock.main)

    # run
    run = sub.add_parser("run", help="run Rally tasks against a local Keystone or a cloud")
    run.add_argument("tasks", nargs="*", metavar="TASK", help="task files (default: the suite)")
    run.add_argument("--task-args", default=None, metavar="JSON")
    run.add_argument(
        "--existing-cloud",
        action="store_true",
        help="use the cloud described by OS_* variables (or --spec)",
    )
    run.add_argument("--spec", default=None, help="a Rally env spec file for an existing cloud")
    run.add_argument("--reports-dir", default="reports")
    _add_deployment_options(run)
    run.set_defaults(func=verbs.run.main)
    verbs.scale.add_parser(sub, _add_deployment_options)

    # report
    rep = sub.add_parser("report", help="summary.html and summary.json from a Rally result")
    rep.add_argument("result", metavar="RESULT.json|TASK_UUID")
    rep.add_argument("--out", default=None, help="output directory")
    rep.set_defaults(func=verbs.report.main)

    # compare
    cmp_ = sub.add_parser("compare", help="A/B comparison of two Rally results")
    cmp_.add_argument("base", metavar="BASE.json")
    cmp_.add_argument("candidate", metavar="CAND.json")
    cmp_.add_argument(
        "--threshold", type=boundary.non_negative, default=10.0, help="percent (default 10)"
    )
    cmp_.add_argument("--alpha", type=boundary.fraction, default=0.01)
    cmp_.add_argument(
        "--max-failure-increase",
        type=boundary.number_in(0, 100),
        default=0.0,
        metavar="POINTS",
        help="failures may rise by this many percentage points when significant "
        "(default 0: any significant increase fails)",
    )
    cmp_.add_argument("--json", default=None, metavar="OUT")
    cmp_.add_argument("--html", default=None, metavar="OUT")
    cmp_.add_argument("--junit", default=None, metavar="OUT")
    cmp_.set_defaults(func=verbs.compare.main)

    # capacity
    cap = sub.add_parser("capacity", help="search N, the highest rps without degradation")
    cap.add_argument("--scenario", required=True)
    cap.add_argument("--low", type=boundary.non_negative, default=1.0)
    cap.add_argument("--high", type=boundary.non_negative, default=200.0)
    cap.add_argument("--warmup", type=boundary.non_negative, default=60.0, help="seconds")
    cap.add_argument("--window", type=boundary.non_negative, default=300.0, help="seconds")
    cap.add_argument("--max-slope", type=boundary.number_in(), default=0.01)
    cap.add_argument("--precision", type=boundary.non_negative, default=1.0, help="rps")
    cap.add_argument(
        "--runner",
        choices=["pooled_rps", "rps"],
        default="pooled_rps",
        help="Rally runner of each probe: pooled_rps (ours, default) or Rally's rps",
    )
    cap.add_argument(
        "--engine",
        choices=["rally", "locust"],
        default="rally",
        help="load engine of every probe: rally (pooled_rps, default) or locust",
    )
    cap.add_argument(
        "--locust-workers",
        type=int,
        default=None,
        metavar="K",
        help="--engine locust: worker processes on this host (default 1); "
        "--workers stays the local Keystone's",
    )
    cap.add_argument(
        "--ramp",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="bracket N with one ramp probe first (default: on, but with --runner rps)",
    )
    cap.add_argument("--target", choices=["local", "cloud", "mock"], default="local")
    cap.add_argument("--spec", default=None)
    cap.add_argument("--reports-dir", default="reports")
    cap.add_argument(
        "--abort-on-sla-failure",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="stop a failing probe early (default on)",
    )
    cap.add_argument(
        "--mock-workers", type=boundary.positive_int, default=1, help="--target mock: processes"
    )
    cap.add_argument(
        "--mock-service-time",
        type=boundary.non_negative,
        default=20.0,
        metavar="MS",
        help="--target mock: ms per token request and worker (default 20: 50 rps a worker)",
    )
    _add_deployment_options(cap)
    cap.set_defaults(func=verbs.capacity.main)

    # load
    load = sub.add_parser("load", help="one open-model probe on the Locust or the Rally engine")
    load.add_argument("--engine", choices=["locust", "rally"], default="locust")
    load.add_argument("--scenario", choices=["authenticate", "validate", "lifecycle"])
    load.add_argument("--rate", type=float, default=10.0, help="requests per second (target)")
    load.add_argument("--duration", type=float, default=30.0, help="seconds measured")
    load.add_argument("--warmup", type=float, default=0.0, help="seconds before, not kept")
    load.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="K",
        help="Locust worker processes started on this host (default 1, 0 with --expect-workers)",
    )
    load.add_argument(
        "--expect-workers",
        type=int,
        default=0,
        metavar="K",
        help="Locust workers started on other hosts that join this master",
    )
    load.add_argument(
        "--master-bind",
        default=None,
        metavar="HOST:PORT",
        help="where the Locust master listens (default 127.0.0.1, a free port)",
    )
    load.add_argument(
        "--expect-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds the workers have to join (default 60)",
    )
    load.add_argument("--arrival", choices=["constant", "poisson"], default="constant")
    load.add_argument(
        "--users", type=int, default=None, help="connections over all workers (Locust's -u)"
    )
    load.add_argument(
        "--http",
        choices=["gevent", "keystoneauth"],
        default="gevent",
        help="HTTP stack of the Locust users (default gevent: geventhttpclient)",
    )
    load.add_argument(
        "--locustfile", action="store_true", help="print the path of our locustfile and exit"
    )
    load.add_argument("--target", choices=["local", "cloud", "mock"], default="mock")
    load.add_argument("--spec", default=None)
    load.add_argument("--reports-dir", default="reports")
    load.add_argument("--mock-workers", type=int, default=1, help="--target mock: processes")
    load.add_argument("--mock-service-time", type=float, default=5.0, metavar="MS")
    load.add_argument("--mock-stall", type=float, default=0.0, metavar="S")
    load.add_argument("--mock-stall-every", type=float, default=0.0, metavar="S")
    load.add_argument(
        "--server-workers",
        type=int,
        default=None,
        help="--target local: Keystone server worker processes (default 2)",
    )
    _add_deployment_options(load, workers=False)
    load.set_defaults(func=verbs.load.main)

    # matrix
    mat = sub.add_parser("matrix", help="run one task on several deployments and tabulate")
    mat.add_argument("--deployments", required=True, metavar="FILE.yaml")
    mat.add_argument("--task", required=True)
    mat.add_argument("--task-args", default=None, metavar="JSON")
    mat.add_argument("--repeat", type=boundary.positive_int, default=1)
    mat.add_argument("--reports-dir", default="reports")
    mat.set_defaults(func=verbs.matrix.main)

    # gate
    gate = sub.add_parser("gate", help="baseline against candidate Keystone, paired requests")
    gate.add_argument("--baseline", required=True, metavar="SPEC")
    gate.add_argument("--candidate", required=True, metavar="SPEC")
    gate.add_argument("--task", default="tasks/gate.yaml")
    gate.add_argument(
        "--rounds",
        type=boundary.positive_int,
        default=1,
        help="task runs before the first verdict (default 1); the gate adds more "
        "while too few blocks are clean and --max-time allows",
    )
    gate.add_argument(
        "--max-time",
        type=boundary.number_in(1.0),
        default=900.0,
        metavar="SECONDS",
        help="the gate may extend itself with more task runs until this many "
        "seconds from its start (default 900)",
    )
    gate.add_argument(
        "--block-seconds",
        type=boundary.number_in(1.0, 60.0),
        default=2.0,
        help="length of a block of pairs judged together (default 2)",
    )
    gate.add_argument(
        "--min-clean-blocks",
        type=boundary.number_in(5, None, int),
        default=8,
        help="clean blocks an action needs for a verdict; fewer: inconclusive, exit 3",
    )
    gate.add_argument(
        "--max-interference",
        type=boundary.non_negative,
        default=0.5,
        metavar="CORES",
        help="a block is set aside when other processes' CPU swings by more than "
        "this within it (default 0.5 core)",
    )
    gate.add_argument(
        "--max-steal",
        type=boundary.non_negative,
        default=0.1,
        metavar="CORES",
        help="a block is set aside when the hypervisor steals more (default 0.1 core)",
    )
    gate.add_argument("--threshold", type=boundary.non_negative, default=10.0)
    gate.add_argument("--alpha", type=boundary.fraction, default=0.01)
    gate.add_argument(
        "--max-failure-increase",
        type=boundary.number_in(0, 100),
        default=0.0,
        metavar="POINTS",
        help="failures may rise by this many percentage points when significant "
        "(default 0: any significant increase fails)",
    )
    gate.add_argument("--reports-dir", default="reports")
    gate.add_argument("--task-args", default=None, metavar="JSON")
    for side in ("baseline", "candidate"):
        gate.add_argument(
            f"--{side}-option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"a deployment setting of the {side} only, e.g. password_hash_rounds=12",
        )
    _add_identity_options(gate)
    gate.set_defaults(func=verbs.gate.main)

    # tasks
    tasks = sub.add_parser("tasks", help="list (or copy) the task and deployment files shipped")
    tasks.add_argument("--copy", default=None, metavar="DIR", help="copy them into DIR")
    tasks.set_defaults(func=verbs.tasks.main)

    # cleanup
    clean = sub.add_parser("cleanup", help="delete the projects and users kept by a reuse TAG")
    clean.add_argument("--reuse", required=True, metavar="TAG")
    clean.add_argument("--spec", default=None)
    clean.add_argument("--run-dir", default=None)
    clean.set_defaults(func=verbs.cleanup.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ARGV and run its verb; every error becomes an exit code (see boundary)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # anywhere on the line, not only before the verb
    argv = [a for a in argv if a != "--debug"]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error, already said in one line (2)
        return exc.code if isinstance(exc.code, int) else errors.EXIT_BAD_INPUT
    return boundary.run(lambda: args.func(args), debug=debug)


if __name__ == "__main__":
    sys.exit(main())
