"""Start a Locust master (and K local workers) on our locustfile, and collect the result.

Used by ``keystone-bench load --engine locust`` and ``capacity --engine
locust``. The master and each worker are the real ``locust`` command in
their own processes (``locust -f locustfile.py --master --headless`` and
``--worker``); workers started on other hosts join the same master when
``expect_workers`` counts them. Every process started here is stopped here.
With a ``sampling`` (driver/machine.sampling, passed by the verb), this host's
machine is sampled while the master runs: the record of the load's window
(verdicts/machine.py) that ``run`` keeps too. The master writes the raw
material (``samples.json``, ``run.json``); once it exited, its Rally JSON
report, ``locust-report.json``, is built here, beside them
(report/locust_report.py), before anyone reads it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rally_keystone_bench import writer
from rally_keystone_bench.clients import credentials
from rally_keystone_bench.engines.locust import schedule, setup
from rally_keystone_bench.engines.locust.samples import SCENARIOS
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.report import locust_report

# default users: enough for 1 s of latency at the rate (a busy Keystone's issue
# took seconds; with too few connections every send goes out late)
CONNECTIONS_PER_RPS = 1.0
MIN_DEFAULT_USERS = 10
MAX_DEFAULT_USERS = 1000
_JOINED_RE = re.compile(r"(\d+) workers connected")
REPORT = "locust-report.json"  # built here from the master's samples.json and run.json


def locustfile_path() -> Path:
    return Path(__file__).with_name("locustfile.py")


def locust_executable() -> str:
    beside = Path(sys.executable).parent / "locust"
    if beside.exists():
        return str(beside)
    found = shutil.which("locust")
    if not found:
        raise BenchError("the locust command is not installed (pip install locust)")
    return found


@dataclass(frozen=True)
class LoadSettings:
    """One open-model load: what, how fast, for how long, from which workers."""

    scenario: str
    rate: float
    duration: float
    warmup: float = 0.0
    workers: int = 1  # started here
    expect_workers: int = 0  # started elsewhere, joining this master
    master_host: str = "127.0.0.1"
    master_port: int = 0  # 0: a free one
    expect_timeout: float = 60.0
    arrival: str = "constant"
    users: int | None = None  # connections over all workers
    keystone_users: int = 4
    tokens_per_user: int = 8
    http: str = "gevent"
    steps: tuple[schedule.Step, ...] = ()  # a ramp instead of rate/duration
    seed: int = 0
    timeout: float = 60.0  # per request
    stop_when_degraded: bool = False
    force: bool = False  # a rate above the measured ceiling is tried anyway

    @property
    def total_workers(self) -> int:
        return self.workers + self.expect_workers

    @property
    def all_steps(self) -> tuple[schedule.Step, ...]:
        return self.steps or schedule.steps_of(self.rate, self.warmup + self.duration)

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.all_steps)

    @property
    def connections(self) -> int:
        if self.users:
            return self.users
        peak = max(s.rate for s in self.all_steps)
        want = int(math.ceil(peak * CONNECTIONS_PER_RPS))
        return max(2 * self.total_workers, MIN_DEFAULT_USERS, min(MAX_DEFAULT_USERS, want))


def check_load(s: LoadSettings) -> None:
    """BenchError with a one-line reason for any bad setting (before any load)."""
    if s.scenario not in SCENARIOS:
        raise BenchError(f"unknown scenario {s.scenario!r}: choose one of {', '.join(SCENARIOS)}")
    for name, value in (("--rate", s.rate), ("--duration", s.duration)):
        if not (math.isfinite(value) and value > 0):
            raise BenchError(f"{name} must be above 0, not {value:g}")
    if not (math.isfinite(s.warmup) and s.warmup >= 0):
        raise BenchError(f"--warmup must be 0 s or more, not {s.warmup:g}")
    if s.workers < 0 or s.expect_workers < 0 or s.total_workers < 1:
        raise BenchError(
            f"need at least 1 worker (--workers K, K >= 1), not {s.workers}"
            + (f" + {s.expect_workers} expected" if s.expect_workers else "")
        )
    if not (math.isfinite(s.expect_timeout) and s.expect_timeout > 0):
        raise BenchError(f"--expect-timeout must be above 0 s, not {s.expect_timeout:g}")
    if s.users is not None and s.users < s.total_workers:
        raise BenchError(f"--users {s.users} is fewer than the {s.total_workers} workers")
    check_size(s)
    try:
        schedule.check(s.all_steps, s.arrival, s.total_workers)
    except ValueError as exc:
        raise BenchError(str(exc)) from None


# What one host's Locust workers send at most: 2431 validations/s with 1
# worker, 2202 with 2, on the 2-core test machine (benchmarks/generator_ceiling.py,
# doc/source/engines.rst). Above HOST_CEILING_RPS per host, the rate asked is not
# the rate sent.
HOST_CEILING_RPS = 2500
# Every sample is kept in memory until the end (about 200 bytes each).
MAX_PLANNED_REQUESTS = 5_000_000


def over_ceiling(s: LoadSettings) -> str | None:
    """The line saying S's rate is above what its load hosts send; None when it is not."""
    hosts = 1 + s.expect_workers  # this host's workers, and at most one host per remote one
    if s.rate <= HOST_CEILING_RPS * hosts:
        return None
    return (
        f"--rate {s.rate:g} is above what {hosts} load host(s) send "
        f"({HOST_CEILING_RPS} requests/s each, measured)"
    )


def check_planned(what: str, rate: float, seconds: float, per: str = "") -> None:
    """BenchError when RATE for SECONDS plans more samples than one run keeps in memory."""
    planned = rate * seconds
    if planned > MAX_PLANNED_REQUESTS:
        raise BenchError(
            f"{what} for {seconds:g} s plans {planned:.3g} requests{per}, "
            f"more than the {MAX_PLANNED_REQUESTS:,} samples one run keeps in memory"
        )


def check_size(s: LoadSettings) -> None:
    """BenchError when the rate or the count asked is beyond what the generators hold."""
    line = over_ceiling(s)
    if line and not s.force:
        raise BenchError(f"{line}: add --expect-workers or lower it, or add --force to try anyway")
    check_planned(f"--rate {s.rate:g}", s.rate, s.duration + s.warmup)


def parse_bind(text: str | None) -> tuple[str, int]:
    """HOST:PORT (PORT 0 or missing: a free one); BenchError when malformed."""
    if not text:
        return "127.0.0.1", 0
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, "0"
    try:
        number = int(port)
    except ValueError:
        raise BenchError(f"--master-bind {text}: the port is not a number") from None
    if not 0 <= number < 65536:
        raise BenchError(f"--master-bind {text}: no such port")
    return host.strip("[]") or "127.0.0.1", number


def bindable(host: str, port: int) -> int:
    """A port the master can listen on at HOST (PORT, or a free one); BenchError if none."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            return sock.getsockname()[1]
    except OSError as exc:
        raise BenchError(f"the master cannot listen on {host}:{port}: {exc.strerror}") from None


@dataclass
class LoadResult:
    report: Path  # the Rally JSON report
    samples: Path
    meta: dict[str, Any]
    out_dir: Path
    elapsed: float = 0.0
    logs: list[Path] = field(default_factory=list)
    sampler: Any = None  # procstat.Sampler of this host while the master ran (or None)


def _admin_environ(credential: Mapping[str, Any]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    project = credential.get("project_name") or "admin"
    env.update(credentials.os_variables({**credential, "project_name": project}))
    if credential.get("https_insecure"):
        env["OS_INSECURE"] = "true"
    if credential.get("https_cacert"):
        env["OS_CACERT"] = str(credential["https_cacert"])
    return env


def master_command(s: LoadSettings, host: str, port: int, out_dir: Path) -> list[str]:
    cmd = [
        locust_executable(),
        "-f",
        str(locustfile_path()),
        "--master",
        "--headless",
        "--only-summary",
        "--master-bind-host",
        host,
        "--master-bind-port",
        str(port),
        "--expect-workers",
        str(s.total_workers),
        "--expect-workers-max-wait",
        f"{s.expect_timeout:g}",
        "-u",
        str(s.connections),
        "-r",
        str(s.connections),
        "--ks-scenario",
        s.scenario,
        "--ks-arrival",
        s.arrival,
        "--ks-seed",
        str(s.seed),
        "--ks-keystone-users",
        str(s.keystone_users),
        "--ks-tokens-per-user",
        str(s.tokens_per_user),
        "--ks-http",
        s.http,
        "--ks-out",
        str(out_dir),
        "--ks-timeout",
        repr(s.timeout),
    ]
    if s.stop_when_degraded:
        cmd.append("--ks-stop-when-degraded")
    if s.steps:
        cmd += ["--ks-steps", json.dumps([[st.rate, st.seconds] for st in s.steps])]
    else:
        cmd += ["--ks-rate", repr(s.rate), "--ks-duration", repr(s.duration)]
        cmd += ["--ks-warmup", repr(s.warmup)]
    return cmd


def worker_command(master_host: str, port: int) -> list[str]:
    host = "127.0.0.1" if master_host in ("0.0.0.0", "") else master_host
    return [
        locust_executable(),
        "-f",
        str(locustfile_path()),
        "--worker",
        "--master-host",
        host,
        "--master-port",
        str(port),
    ]


INTERRUPT_GRACE_S = 30.0  # an interrupted master's time to collect and write the samples


def _stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _signal_name(exc: BaseException) -> str:
    try:
        return signal.Signals(getattr(exc, "signum", signal.SIGINT)).name
    except ValueError:
        return "interrupted"


def run_load(
    s: LoadSettings,
    admin_credential: Mapping[str, Any],
    out_dir: Path,
    say: Callable[[str], None] = lambda _m: None,
    worker_prefixes: list[list[str]] | None = None,
    master_prefix: list[str] | None = None,
    run_id: str | None = None,
    sampling: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
) -> LoadResult:
    """Run the master and the local workers to the end; BenchError when no result came.

    ``worker_prefixes`` (one per worker) and ``master_prefix`` wrap the
    commands (``ip netns exec NS`` in the tests that put them on other "hosts").
    RUN_ID (``setup.new_run_id``, default a fresh one) names the users and the
    project the master makes: ``kbl-<RUN_ID>``. SAMPLING (driver/machine.sampling)
    samples this host from the master's start to its end: the result's ``sampler``.
    """
    check_load(s)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in ("run.json", REPORT, "samples.json"):
        (out_dir / name).unlink(missing_ok=True)
    host, port = s.master_host, s.master_port
    if master_prefix is None:
        port = bindable(host, port)
    elif not port:
        raise BenchError("a master in another namespace needs an explicit port")
    env = _admin_environ(admin_credential)
    env[setup.RUN_ID_ENV] = run_id or setup.new_run_id()  # the names of what it makes
    master_log = out_dir / "master.log"
    procs: list[subprocess.Popen] = []
    logs = [master_log]
    t0 = time.monotonic()
    sampled = sampling() if sampling is not None else contextlib.nullcontext()
    with sampled as sampler:  # this host while the master runs
        try:
            master_argv = [*(master_prefix or []), *master_command(s, host, port, out_dir)]
            master = _spawn(master_argv, env, master_log)
            procs.append(master)
            worker_env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
            for i in range(s.workers):
                path = out_dir / f"worker-{i}.log"
                logs.append(path)
                prefix = worker_prefixes[i] if worker_prefixes else []
                procs.append(_spawn([*prefix, *worker_command(host, port)], worker_env, path))
            where = f"{host}:{port}"
            say(
                f"Locust master on {where}: {s.workers} local worker(s)"
                + (f", waiting for {s.expect_workers} more" if s.expect_workers else "")
                + f", {s.connections} connections"
            )
            limit = s.expect_timeout + 120.0 + s.seconds + 120.0
            try:
                master.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                raise BenchError(
                    f"the Locust master ran past {limit:.0f} s; see {master_log}"
                ) from None
        except KeyboardInterrupt as exc:
            _stop_interrupted(procs, exc, say)
            if (out_dir / "run.json").exists():
                kept = _result(out_dir, time.monotonic() - t0, logs, sampler)
                exc.result = kept  # type: ignore[attr-defined]
            raise
        finally:
            for proc in procs[1:]:
                _stop(proc)
            for proc in procs[:1]:
                _stop(proc, grace=60.0)
    elapsed = time.monotonic() - t0
    if not (out_dir / "run.json").exists() and (master.returncode or 0) < 0:
        raise BenchError(
            f"the Locust master was killed ({signal.Signals(-master.returncode).name}) "
            f"before it wrote a result; see {master_log}"
        )
    if not (out_dir / "run.json").exists():
        raise _no_result(master_log.read_text(errors="replace"), s, f"{host}:{port}")
    return _result(out_dir, elapsed, logs, sampler)


def _spawn(argv: list[str], env: Mapping[str, str], log_path: Path) -> subprocess.Popen:
    """ARGV in a session of its own, its output in LOG_PATH."""
    with writer.open_stream(log_path, "wb") as log:
        return subprocess.Popen(
            argv,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _stop_interrupted(
    procs: list[subprocess.Popen], exc: BaseException, say: Callable[[str], None]
) -> None:
    """Stop an interrupted run: the master (PROCS[0]) first gets to write what it has.

    SIGUSR1: the master stops the workers, collects and writes what they
    sent, deletes what it made, and quits; SIGTERM only after INTERRUPT_GRACE_S.
    """
    if procs and procs[0].poll() is None:
        say(
            f"{_signal_name(exc)}: stopping the load; the Locust master collects and "
            f"writes what was sent (at most {INTERRUPT_GRACE_S:g} s)"
        )
        with contextlib.suppress(ProcessLookupError):
            procs[0].send_signal(signal.SIGUSR1)
        with contextlib.suppress(subprocess.TimeoutExpired):
            procs[0].wait(timeout=INTERRUPT_GRACE_S)
    for proc in procs:
        _stop(proc, grace=60.0)


def _result(out_dir: Path, elapsed: float, logs: list[Path], sampler: Any = None) -> LoadResult:
    """The run the master wrote in OUT_DIR (run.json, the samples), and its report built here."""
    report = write_report(out_dir)
    meta = json.loads((out_dir / "run.json").read_text())
    return LoadResult(report, out_dir / "samples.json", meta, out_dir, elapsed, logs, sampler)


def write_report(out_dir: Path) -> Path:
    """OUT_DIR/locust-report.json, from the samples.json and run.json a master wrote there."""
    meta = json.loads((out_dir / "run.json").read_text())
    samples = json.loads((out_dir / "samples.json").read_text())
    rally_scenario = SCENARIOS[meta["scenario"]]
    return locust_report.write(out_dir / REPORT, samples, meta, rally_scenario)


def ensure_report(path: Path) -> None:
    """Build the Locust report at PATH when it is not there yet but its master's files are.

    A master started by hand (``locust -f ... --master --ks-out DIR``) leaves
    DIR/samples.json and DIR/run.json; ``keystone-bench report
    DIR/locust-report.json`` builds the report there first, as ``load`` does.
    """
    done = path.parent / "run.json"
    if path.name == REPORT and not path.exists() and done.exists():
        write_report(path.parent)


def _no_result(master_log: str, s: LoadSettings, where: str) -> BenchError:
    """Why the master, whose log is MASTER_LOG, ended without writing run.json."""
    if "Gave up waiting for workers" in master_log:
        joined = [int(m) for m in _JOINED_RE.findall(master_log)]
        return BenchError(
            f"{max(joined, default=0)} of {s.total_workers} worker(s) joined the master "
            f"on {where} within --expect-timeout {s.expect_timeout:g} s; "
            "no load was sent, no user was made"
        )
    tail = [ln for ln in master_log.strip().splitlines() if ln.strip()][-1:]
    return BenchError(f"the Locust master ended without a result: {' '.join(tail)[:300]}")
