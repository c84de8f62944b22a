"""What a probe measures and with what: the target (--target, --spec, --reports-dir,
--force), the mock's options and the load engine's."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path

from rally_keystone_bench import boundary
from rally_keystone_bench.deploy.mock import MockKeystone, check_stall
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verbs import options
from rally_keystone_bench.verbs.applicability import Rule
from rally_keystone_bench.verbs.groups.base import LOCUST, MOCK, NONZERO, RALLY, OptionGroup

TARGET_HELP = {
    "local": "what is measured: a local Keystone (default), the cloud of the OS_* "
    "variables or --spec, or the mock",
    "mock": "what is measured: the mock (default), a local Keystone, or the cloud "
    "of the OS_* variables or --spec",
}


@dataclasses.dataclass(frozen=True)
class TargetSettings:
    target: str  # local, cloud or mock
    spec: str | None  # --target cloud: a Rally env spec file
    reports_dir: str
    force: bool

    def cloud_spec(self) -> dict:
        """The Rally env spec of the cloud: --spec FILE, else the OS_* variables."""
        return options.cloud_spec(self.spec)


class Target(OptionGroup):
    """--target (DEFAULT: local or mock), --spec, --reports-dir and --force, as capacity
    and load declare them."""

    applies = {"spec": ("target", ("cloud",))}

    def __init__(self, default: str) -> None:
        self.default = default

    def add(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--target",
            choices=["local", "cloud", "mock"],
            default=self.default,
            help=TARGET_HELP[self.default],
        )
        parser.add_argument(
            "--spec",
            default=None,
            help="--target cloud: a Rally env spec file (default: the OS_* variables)",
        )
        options.add_reports_dir_option(parser)
        parser.add_argument(
            "--force",
            action="store_true",
            help="start a rate above what the load generator sent here when measured "
            "(doc/source/troubleshooting.rst); the result then says generator-limited",
        )

    def settings(self, args: argparse.Namespace) -> TargetSettings:
        """The target; BenchError for a --spec that cannot be one."""
        found = TargetSettings(args.target, args.spec, args.reports_dir, args.force)
        if found.spec and found.target != "cloud":
            raise BenchError("--spec describes an existing cloud: use it with --target cloud")
        if found.target == "cloud" and found.spec and not Path(found.spec).is_file():
            raise BenchError(f"env spec {found.spec} does not exist")
        return found


@dataclasses.dataclass(frozen=True)
class MockSettings:
    workers: int
    service_time_ms: float
    stall_s: float
    stall_every_s: float

    def keystone(self, run_dir: Path) -> MockKeystone:
        """The mock, in RUN_DIR/mock (not started)."""
        return MockKeystone(
            workers=self.workers,
            service_time_ms=self.service_time_ms,
            stall_s=self.stall_s,
            stall_every_s=self.stall_every_s,
            run_dir=run_dir / "mock",
        )


@dataclasses.dataclass(frozen=True)
class _MockFace:
    """How a verb's parser spells the mock's options: their prefix, --workers' default,
    the stall's metavar and type, and their help (the service time's is the verb's)."""

    prefix: str
    workers: int | None  # --workers' default (None: the mock's own, as --workers elsewhere)
    seconds: str  # the stall options' metavar
    stall_type: Callable[[str], float]
    help: Mapping[str, str]


# capacity and load: the mock is one of the targets, its options prefixed --mock-.
_TARGET_FACE = _MockFace(
    "mock-",
    1,
    "S",
    float,  # a negative stall: check_stall's line, under --target mock only
    {
        "workers": "--target mock: processes",
        "stall": "--target mock: every worker stops answering for S seconds "
        "(needs --mock-stall-every)",
        "stall_every": "--target mock: seconds from one stall to the next",
    },
)
# the mock verb: the mock itself, its options unprefixed.
_SERVE_FACE = _MockFace(
    "",
    None,
    "SECONDS",
    boundary.non_negative,
    {
        "workers": "server processes (default 1)",
        "stall": "every worker stops answering token requests for this long (needs --stall-every)",
        "stall_every": "seconds from one stall to the next; the first starts this long after start",
    },
)


class Mock(OptionGroup):
    """The mock's processes, service time (its default and help the verb's) and, with
    STALL, its stalls: --mock-workers, --mock-service-time, --mock-stall and
    --mock-stall-every, applying to --target mock; with SERVE, the mock verb's
    --workers, --service-time, --stall and --stall-every (--stall-every applying
    to a --stall above 0)."""

    def __init__(
        self, service_time: float, service_time_help: str, stall: bool, serve: bool = False
    ) -> None:
        self.service_time, self.service_time_help = service_time, service_time_help
        self.stall = stall
        self.face = _SERVE_FACE if serve else _TARGET_FACE
        if serve:
            self.applies = {self.dest("stall_every"): (self.dest("stall"), NONZERO)}
        else:
            dests = ("workers", "service_time") + (("stall", "stall_every") if stall else ())
            self.applies = {self.dest(d): MOCK for d in dests}

    def dest(self, name: str) -> str:
        """The dest of the mock's option NAME (workers, service_time, stall, stall_every)."""
        return self.face.prefix.replace("-", "_") + name

    def add(self, parser: argparse.ArgumentParser) -> None:
        self.add_service(parser)
        self.add_stall(parser)

    def add_service(self, parser: argparse.ArgumentParser) -> None:
        """The mock's worker processes and service time."""
        prefix = self.face.prefix
        parser.add_argument(
            f"--{prefix}workers",
            type=boundary.positive_int,
            default=self.face.workers,
            help=self.face.help["workers"],
        )
        parser.add_argument(
            f"--{prefix}service-time",
            type=boundary.non_negative,
            default=self.service_time,
            metavar="MS",
            help=self.service_time_help,
        )

    def add_stall(self, parser: argparse.ArgumentParser) -> None:
        """With STALL: how long every worker stops answering, and how often."""
        if not self.stall:
            return
        for name, flag in (("stall", "stall"), ("stall_every", "stall-every")):
            parser.add_argument(
                f"--{self.face.prefix}{flag}",
                type=self.face.stall_type,
                default=0.0,
                metavar=self.face.seconds,
                help=self.face.help[name],
            )

    def settings(self, args: argparse.Namespace) -> MockSettings:
        """The mock's settings (a stall without its period: BenchError, under --target
        mock; the mock verb's are checked as the mock starts)."""
        given = {n: vars(args)[self.dest(n)] for n in ("workers", "service_time")}
        stall = (0.0, 0.0)
        if self.stall:
            stall = (vars(args)[self.dest("stall")], vars(args)[self.dest("stall_every")])
        if self.face is _TARGET_FACE and args.target == "mock":
            check_stall(*stall)  # --mock-workers and --mock-service-time: by their types
        workers = given["workers"] or 1  # the mock verb's --workers not given: one process
        return MockSettings(workers, given["service_time"], *stall)


@dataclasses.dataclass(frozen=True)
class EngineSettings:
    engine: str  # rally or locust
    runner: str | None  # the Rally runner (None: the verb has no --runner)
    locust_workers: int | None  # None: not given


class Engine(OptionGroup):
    """--engine (its choices, default and help the verb's), --runner with RUNNER, and
    --locust-workers K (its dest LOCUST_DEST, its help LOCUST_HELP); with RULED,
    --runner applies to --engine rally and --locust-workers to --engine locust."""

    def __init__(
        self,
        choices: list[str],
        help: str,
        locust_dest: str,
        locust_help: str,
        runner: bool = False,
        ruled: bool = False,
    ) -> None:
        self.choices, self.help, self.runner = choices, help, runner
        self.locust_dest, self.locust_help = locust_dest, locust_help
        # load checks its own (--engine rally runs on this host only)
        self.applies: dict[str, Rule] = {locust_dest: LOCUST, "runner": RALLY} if ruled else {}

    def add(self, parser: argparse.ArgumentParser) -> None:
        self.add_engine(parser)
        self.add_locust_workers(parser)

    def add_engine(self, parser: argparse.ArgumentParser) -> None:
        """--runner (with RUNNER) and --engine (load declares its --locust-workers later)."""
        if self.runner:
            parser.add_argument(
                "--runner",
                choices=["pooled_rps", "rps"],
                default="pooled_rps",
                help="Rally runner of each probe: pooled_rps (ours, default) or Rally's rps",
            )
        parser.add_argument(
            "--engine", choices=self.choices, default=self.choices[0], help=self.help
        )

    def add_locust_workers(self, parser: argparse.ArgumentParser) -> None:
        """``--locust-workers K``: the Locust engine's worker processes on this host."""
        parser.add_argument(
            "--locust-workers",
            dest=self.locust_dest,
            type=boundary.number_in(0, None, int),
            default=None,
            metavar="K",
            help=self.locust_help,
        )

    def settings(self, args: argparse.Namespace) -> EngineSettings:
        runner = args.runner if self.runner else None
        return EngineSettings(args.engine, runner, vars(args)[self.locust_dest])
