"""The options of ``keystone-bench gate``: what it compares, how long it measures, what
its verdict allows. verbs/gate.py runs the gate; this module only declares them."""

from __future__ import annotations

import argparse

from rally_keystone_bench import boundary
from rally_keystone_bench.verbs import groups
from rally_keystone_bench.verbs import options as verb_options

CLOUD_TASK = "tasks/gate-cloud.yaml"

# The option groups the gate composes: the verdict's rules, where Keystone's users live
# and --set (both sides), and the counters (--trace, --max-sql-increase, --profile).
VERDICT_RULES = groups.VerdictRules()
IDENTITY = groups.Identity()
CONF = groups.ConfSet()
TRACING = groups.Counters()
RULES = groups.rules(VERDICT_RULES, IDENTITY, CONF, TRACING)


def add_baseline_arguments(p: argparse.ArgumentParser) -> None:
    """--baseline SPEC, or a commit of the candidate's checkout (its parent by default)."""
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--baseline",
        metavar="SPEC",
        default=None,
        help="a release (keystone==30.0.0), a checkout path, or git:REF of the candidate's "
        "checkout (default: git:HEAD~1, the change's parent)",
    )
    what.add_argument(
        "--baseline-ref",
        metavar="REF",
        default=None,
        help="the candidate checkout's commit to compare with (same as --baseline git:REF)",
    )
    what.add_argument(
        "--baseline-branch",
        metavar="BRANCH",
        default=None,
        help="compare with where the candidate's HEAD left BRANCH (their merge base)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``keystone-bench gate``."""
    add_baseline_arguments(parser)
    verb_options.add_history_option(parser)
    parser.add_argument(
        "--candidate",
        required=True,
        metavar="SPEC",
        help="the Keystone to judge: a release (keystone==30.0.0), a checkout path "
        "or git-commit:REPO@COMMIT",
    )
    parser.add_argument(
        "--task",
        default=CLOUD_TASK,
        help=f"default {CLOUD_TASK}: every token path, memcached on; the quick "
        "two-path task: tasks/gate.yaml",
    )
    add_schedule_arguments(parser)
    parser.add_argument(
        "--threshold",
        type=boundary.non_negative,
        default=10.0,
        help="a slowdown (or CPU per request growth) above this many percent fails (default 10)",
    )
    VERDICT_RULES.add(parser)
    verb_options.add_reports_dir_option(parser)
    parser.add_argument(
        "--task-args",
        default=None,
        metavar="JSON",
        help="Jinja2 arguments of the task, as a JSON object (rally task start --task-args)",
    )
    for side in ("baseline", "candidate"):
        parser.add_argument(
            f"--{side}-option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"a deployment setting of the {side} only, e.g. password_hash_rounds=12, "
            "or a keystone.conf one, e.g. token.provider=jws",
        )
    IDENTITY.add(parser)
    CONF.add(parser)  # both sides; one side's: --candidate-option S.O=V
    TRACING.add(parser)


def add_schedule_arguments(parser: argparse.ArgumentParser) -> None:
    """How long the gate measures, and which blocks of it count (interference, steal)."""
    parser.add_argument(
        "--rounds",
        type=boundary.positive_int,
        default=1,
        help="task runs before the first verdict (default 1); the gate adds more "
        "while too few blocks are clean and --max-time allows",
    )
    parser.add_argument(
        "--max-time",
        type=boundary.number_in(1.0),
        default=900.0,
        metavar="SECONDS",
        help="the gate may extend itself with more task runs until this many "
        "seconds from its start (default 900)",
    )
    parser.add_argument(
        "--block-seconds",
        type=boundary.number_in(1.0, 60.0),
        default=2.0,
        help="length of a block of pairs judged together (default 2)",
    )
    parser.add_argument(
        "--min-clean-blocks",
        type=boundary.number_in(5, None, int),
        default=8,
        help="clean blocks an action needs for a verdict; fewer: inconclusive, exit 3",
    )
    parser.add_argument(
        "--max-interference",
        type=boundary.non_negative,
        default=0.5,
        metavar="CORES",
        help="a block is set aside when other processes' CPU swings by more than "
        "this within it (default 0.5 core)",
    )
    parser.add_argument(
        "--max-steal",
        type=boundary.non_negative,
        default=0.1,
        metavar="CORES",
        help="a block is set aside when the hypervisor steals more (default 0.1 core)",
    )
