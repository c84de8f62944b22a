"""The Locust engine's custom arguments (``--ks-*``) and the schedule they describe.

The locustfile registers :func:`add_options` with Locust; workers receive
the master's values (Locust's custom arguments, and the plan).
"""

from __future__ import annotations

import json
from typing import Any

from rally_keystone_bench.engines.locust import samples as sm
from rally_keystone_bench.engines.locust import schedule

HTTP_STACKS = ("gevent", "keystoneauth")


def add_options(parser: Any) -> None:
    """Our options on Locust's parser (``events.init_command_line_parser``)."""
    parser.add_argument(
        "--ks-scenario",
        choices=sorted(sm.SCENARIOS),
        default="validate",
        help="authenticate (issue), validate (pre-issued tokens) or lifecycle",
    )
    parser.add_argument("--ks-rate", type=float, default=10.0, help="requests/s, all workers")
    parser.add_argument("--ks-duration", type=float, default=30.0, help="seconds measured")
    parser.add_argument("--ks-warmup", type=float, default=0.0, help="seconds before, not kept")
    parser.add_argument(
        "--ks-steps",
        default="",
        help="a ramp instead of --ks-rate/--ks-duration: JSON [[rate, seconds], ...]",
    )
    parser.add_argument("--ks-arrival", choices=schedule.ARRIVALS, default="constant")
    parser.add_argument("--ks-seed", type=int, default=0, help="of the Poisson arrivals")
    parser.add_argument("--ks-keystone-users", type=int, default=4, help="users to create")
    parser.add_argument("--ks-tokens-per-user", type=int, default=8, help="validate: pool")
    parser.add_argument("--ks-http", choices=HTTP_STACKS, default="gevent")
    parser.add_argument("--ks-timeout", type=float, default=60.0, help="per request, s")
    parser.add_argument("--ks-ready-timeout", type=float, default=120.0)
    parser.add_argument(
        "--ks-stop-when-degraded",
        action="store_true",
        help="a ramp: a worker sends nothing past the step in which a request failed, "
        "went out more than 0.25 s late or was answered more than 2 s after it was due",
    )
    parser.add_argument("--ks-out", default="locust-out", help="master: where files go")


def steps_from(opts: Any) -> tuple[schedule.Step, ...]:
    if opts.ks_steps:
        return tuple(schedule.Step(float(r), float(s)) for r, s in json.loads(opts.ks_steps))
    return schedule.steps_of(opts.ks_rate, opts.ks_warmup + opts.ks_duration)
