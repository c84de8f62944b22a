"""The keystone-bench command: argument parsing and dispatch to the verbs.

Every verb exits 0 on pass, 1 when a verdict failed (SLA, regression,
degradation) and 2 on bad input or environment, with a one-line reason on
stderr. Each verb is a module under verbs/ that declares its options
(``add_arguments``) and runs (``main``); this module only assembles them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import rally_keystone_bench.verbs.applicability
import rally_keystone_bench.verbs.capacity
import rally_keystone_bench.verbs.cleanup
import rally_keystone_bench.verbs.compare
import rally_keystone_bench.verbs.gate
import rally_keystone_bench.verbs.history
import rally_keystone_bench.verbs.keystone
import rally_keystone_bench.verbs.load
import rally_keystone_bench.verbs.matrix
import rally_keystone_bench.verbs.mock
import rally_keystone_bench.verbs.report
import rally_keystone_bench.verbs.run
import rally_keystone_bench.verbs.scale
import rally_keystone_bench.verbs.tasks  # noqa: F401  (each verb module, as verbs.NAME)
from rally_keystone_bench import boundary, errors, verbs


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
    verbs.keystone.add_arguments(ks)

    # mock
    mock = sub.add_parser("mock", help="a minimal, fast token service on loopback")
    verbs.mock.add_arguments(mock)
    mock.set_defaults(func=verbs.mock.main)

    # run
    run = sub.add_parser("run", help="run Rally tasks against a local Keystone or a cloud")
    verbs.run.add_arguments(run)
    verbs.run.add_trace_options(run)
    run.set_defaults(func=verbs.run.main)

    # scale
    scale = sub.add_parser("scale", help="sweep one data size and fit how token latency grows")
    verbs.scale.add_arguments(scale)
    scale.set_defaults(func=verbs.scale.main)

    # report
    rep = sub.add_parser("report", help="summary.html and summary.json from a Rally result")
    verbs.report.add_arguments(rep)
    rep.set_defaults(func=verbs.report.main)

    # compare
    cmp_ = sub.add_parser("compare", help="A/B comparison of two Rally results")
    verbs.compare.add_arguments(cmp_)
    cmp_.set_defaults(func=verbs.compare.main)

    # capacity
    cap = sub.add_parser("capacity", help="search N, the highest rps without degradation")
    verbs.capacity.add_arguments(cap)
    cap.set_defaults(func=verbs.capacity.main)

    # load
    load = sub.add_parser("load", help="one open-model probe on the Locust or the Rally engine")
    verbs.load.add_arguments(load)
    load.set_defaults(func=verbs.load.main)

    # matrix
    mat = sub.add_parser("matrix", help="run one task on several deployments and tabulate")
    verbs.matrix.add_arguments(mat)
    mat.set_defaults(func=verbs.matrix.main)

    # gate
    gate = sub.add_parser("gate", help="baseline against candidate Keystone, paired requests")
    verbs.gate.add_arguments(gate)
    verbs.gate.add_counter_options(gate)
    gate.set_defaults(func=verbs.gate.main)

    # history
    hist = sub.add_parser("history", help="the runs a results store holds, their change points")
    verbs.history.add_arguments(hist)
    hist.set_defaults(func=verbs.history.main)

    # tasks
    tasks = sub.add_parser("tasks", help="list (or copy) the task and deployment files shipped")
    verbs.tasks.add_arguments(tasks)
    tasks.set_defaults(func=verbs.tasks.main)

    # cleanup
    clean = sub.add_parser("cleanup", help="delete the projects and users kept by a reuse TAG")
    verbs.cleanup.add_arguments(clean)
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
    return boundary.run(lambda: _checked(parser, args)(args), debug=debug)


def _checked(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """ARGS's verb, once no option was given where it does not apply."""
    verbs.applicability.check(args.verb, args, verbs.applicability.defaults_of(parser, args.verb))
    return args.func


if __name__ == "__main__":
    sys.exit(main())
