"""The keystone-bench command: argument parsing and dispatch to the verbs.

Every verb exits 0 on pass, 1 when a verdict failed (SLA, regression,
degradation) and 2 on bad input or environment, with a one-line reason on
stderr. The modules that do the work are imported only when their verb runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from rally_keystone_bench import errors


def _target(path: str):
    """Bind a verb to 'module:function', imported only when the verb runs."""
    return path


def _add_deployment_options(p: argparse.ArgumentParser) -> None:
    """Options that describe a local Keystone deployment."""
    p.add_argument("--port", type=int, default=None, help="loopback port (default: a free one)")
    p.add_argument("--workers", type=int, default=None, help="server worker processes (default 2)")
    p.add_argument("--threads", type=int, default=None, help="threads per worker (default 1)")
    p.add_argument(
        "--keystone",
        metavar="SPEC",
        default=None,
        help="pip requirement (keystone==30.0.0) or a local checkout path "
        "(default: the newest release)",
    )
    p.add_argument(
        "--server",
        choices=["uwsgi", "gunicorn", "apache"],
        default=None,
        help="WSGI server (default uwsgi)",
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
        "--password-hash-rounds",
        type=int,
        default=None,
        metavar="R",
        help="bcrypt rounds for new passwords (default: upstream's)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="keystone-bench",
        description="Benchmark OpenStack Keystone tokens with Rally.",
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
    up.set_defaults(func=_target("rally_keystone_bench.deploy.commands:keystone_up"))
    down = ks_sub.add_parser("down", help="stop the local Keystone, keep its logs")
    down.add_argument("--run-dir", default=None)
    down.set_defaults(func=_target("rally_keystone_bench.deploy.commands:keystone_down"))
    status = ks_sub.add_parser("status", help="say whether the local Keystone answers")
    status.add_argument("--run-dir", default=None)
    status.set_defaults(func=_target("rally_keystone_bench.deploy.commands:keystone_status"))

    # mock
    mock = sub.add_parser("mock", help="a minimal, fast token service on loopback")
    mock.add_argument("--port", type=int, default=None)
    mock.add_argument("--workers", type=int, default=1)
    mock.add_argument(
        "--service-time",
        type=float,
        default=0.0,
        metavar="MS",
        help="fixed service time per request, in ms",
    )
    mock.add_argument(
        "--slope",
        type=float,
        default=0.0,
        metavar="K",
        help="latency grows by K ms every second",
    )
    mock.add_argument(
        "--error-rate",
        type=float,
        default=0.0,
        help="fraction of token requests answered with HTTP 500",
    )
    mock.add_argument("--run-dir", default=None)
    mock.set_defaults(func=_target("rally_keystone_bench.deploy.mock:main"))

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
    run.set_defaults(func=_target("rally_keystone_bench.runner:main"))

    # report
    rep = sub.add_parser("report", help="summary.html and summary.json from a Rally result")
    rep.add_argument("result", metavar="RESULT.json|TASK_UUID")
    rep.add_argument("--out", default=None, help="output directory")
    rep.set_defaults(func=_target("rally_keystone_bench.report.render:main"))

    # compare
    cmp_ = sub.add_parser("compare", help="A/B comparison of two Rally results")
    cmp_.add_argument("base", metavar="BASE.json")
    cmp_.add_argument("candidate", metavar="CAND.json")
    cmp_.add_argument("--threshold", type=float, default=10.0, help="percent (default 10)")
    cmp_.add_argument("--alpha", type=float, default=0.01)
    cmp_.add_argument("--json", default=None, metavar="OUT")
    cmp_.add_argument("--html", default=None, metavar="OUT")
    cmp_.add_argument("--junit", default=None, metavar="OUT")
    cmp_.set_defaults(func=_target("rally_keystone_bench.compare:main"))

    # capacity
    cap = sub.add_parser("capacity", help="search N, the highest rps without degradation")
    cap.add_argument("--scenario", required=True)
    cap.add_argument("--low", type=float, default=1.0)
    cap.add_argument("--high", type=float, default=200.0)
    cap.add_argument("--warmup", type=float, default=60.0, help="seconds")
    cap.add_argument("--window", type=float, default=300.0, help="seconds")
    cap.add_argument("--max-slope", type=float, default=0.01)
    cap.add_argument("--precision", type=float, default=1.0, help="rps")
    cap.add_argument(
        "--runner",
        choices=["pooled_rps", "rps"],
        default="pooled_rps",
        help="Rally runner of each probe: pooled_rps (ours, default) or Rally's rps",
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
    cap.add_argument("--mock-workers", type=int, default=1, help="--target mock: processes")
    cap.add_argument(
        "--mock-service-time",
        type=float,
        default=20.0,
        metavar="MS",
        help="--target mock: ms per token request and worker (default 20: 50 rps a worker)",
    )
    _add_deployment_options(cap)
    cap.set_defaults(func=_target("rally_keystone_bench.capacity:main"))

    # matrix
    mat = sub.add_parser("matrix", help="run one task on several deployments and tabulate")
    mat.add_argument("--deployments", required=True, metavar="FILE.yaml")
    mat.add_argument("--task", required=True)
    mat.add_argument("--task-args", default=None, metavar="JSON")
    mat.add_argument("--repeat", type=int, default=1)
    mat.add_argument("--reports-dir", default="reports")
    mat.set_defaults(func=_target("rally_keystone_bench.matrix:main"))

    # gate
    gate = sub.add_parser("gate", help="baseline against candidate Keystone, interleaved")
    gate.add_argument("--baseline", required=True, metavar="SPEC")
    gate.add_argument("--candidate", required=True, metavar="SPEC")
    gate.add_argument("--task", default="tasks/gate.yaml")
    gate.add_argument("--rounds", type=int, default=3)
    gate.add_argument("--threshold", type=float, default=10.0)
    gate.add_argument("--alpha", type=float, default=0.01)
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
    gate.set_defaults(func=_target("rally_keystone_bench.gate:main"))

    # cleanup
    clean = sub.add_parser("cleanup", help="delete the projects and users kept by a reuse TAG")
    clean.add_argument("--reuse", required=True, metavar="TAG")
    clean.add_argument("--spec", default=None)
    clean.add_argument("--run-dir", default=None)
    clean.set_defaults(func=_target("rally_keystone_bench.contexts.reuse:cleanup_main"))
    return parser


def _resolve(target: str):
    module_name, func_name = target.split(":")
    return getattr(importlib.import_module(module_name), func_name)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = _resolve(args.func)(args)
    except errors.BenchError as exc:
        print(f"keystone-bench: {exc}", file=sys.stderr)
        return errors.EXIT_BAD_INPUT
    except errors.VerdictFailed as exc:
        print(f"keystone-bench: {exc}", file=sys.stderr)
        return errors.EXIT_VERDICT
    except KeyboardInterrupt:
        print("keystone-bench: interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
