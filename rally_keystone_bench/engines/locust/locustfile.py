"""The Locust engine's locustfile: ``locust -f <this file> --master`` and ``--worker``.

Run it the way Locust users expect::

    # master (this host): prepares users, waits for 2 workers, writes the report
    OS_AUTH_URL=... OS_USERNAME=admin OS_PASSWORD=... OS_PROJECT_NAME=admin \\
    locust -f $(keystone-bench load --locustfile) --master --headless \\
        --expect-workers 2 -u 16 -r 16 \\
        --ks-scenario validate --ks-rate 500 --ks-duration 60 --ks-out reports/locust
    # each worker (any host that reaches the master and Keystone)
    locust -f $(keystone-bench load --locustfile) --worker --master-host MASTER

Our options are Locust custom arguments (``--ks-*``); workers receive them
from the master. ``-u`` is the number of connections (Locust users) over
all workers, at least one per worker.

The load is an open model: the master sends every worker its share of one
schedule (``schedule``), and each request goes out when it is due, whatever
the earlier answers did; a request that finds every user of its worker busy
goes out late and keeps its intended start. Each user holds one kept-alive
connection and sends through TokenClient, one timed request per action.
Every request's sample (intended start, send, answer, status) goes back to
the master unrounded (custom messages); the master writes

- ``samples.json``: every sample of every worker, as sent;
- ``locust-report.json``: a Rally JSON report (format 1.2) of the samples
  after the warm-up, with a ``samples_complete`` criterion that fails when a
  worker was lost;
- ``run.json``: the run's settings, each worker's count of samples and of
  those received, lost workers, and what was left in Keystone (nothing,
  unless the deletion failed).

Users, projects and tokens are made on the master with the admin client
(OS_* variables), before the load, and deleted after it, on every path.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import gevent
from gevent.event import Event
from locust import User, events, task
from locust.exception import StopUser
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner

from rally_keystone_bench.engines.locust import calls, schedule
from rally_keystone_bench.engines.locust import samples as sm
from rally_keystone_bench.engines.locust.setup import user_auth, worker_options

LOG = logging.getLogger("keystone-bench")
CHUNK = 5000  # samples per message from a worker
LAG_LIMIT_S = 0.25  # a send this late: the step is degraded (probe_verdict.LAG_LIMIT_S)
RAMP_LATENCY_S = 2.0  # an answer this long after its due time, too (capacity.RAMP_LATENCY_S)
HTTP_STACKS = ("gevent", "keystoneauth")


@events.init_command_line_parser.add_listener
def add_options(parser: Any) -> None:
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


def _node_ids(runner: MasterRunner) -> list[str]:
    nodes = runner.clients.ready + runner.clients.spawning + runner.clients.running
    return sorted(n.id for n in nodes)


# -- master --------------------------------------------------------------------
class Master:
    """Prepares Keystone, hands out the plan, collects samples, writes the report."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.runner: MasterRunner = env.runner
        self.opts = env.parsed_options
        self.out = Path(self.opts.ks_out)
        self.workers: list[str] = []
        self.ready: dict[str, int] = {}
        self.done: dict[str, dict] = {}
        self.received: dict[str, list] = {}
        self.lost: list[str] = []
        self.admin: Any = None
        self.prepared: Any = None
        self.left_behind: list[str] | None = None
        self.error = ""
        self.t0: float | None = None
        self.setup_started: float | None = None
        self.started = False
        for name, handler in (
            ("ks_ready", self.on_ready),
            ("ks_samples", self.on_samples),
            ("ks_done", self.on_done),
        ):
            self.runner.register_message(name, handler)
        # SIGUSR1 from keystone-bench (its user pressed Ctrl-C, or it got SIGTERM):
        # stop the load, collect what the workers sent, write it, then quit.
        gevent.signal_handler(signal.SIGUSR1, self.interrupt)
        self.interrupted = False

    def interrupt(self) -> None:
        if self.interrupted:
            return
        self.interrupted = True
        LOG.info("keystone-bench: interrupted: stopping the load, collecting the samples")
        self.broadcast("ks_stop", {})
        if self.t0 is None and not self.started:
            gevent.spawn(self.finish)  # nothing started: nothing to collect

    def on_ready(self, environment: Any, msg: Any) -> None:
        self.ready[msg.node_id] = int(msg.data.get("users", 0))

    def on_samples(self, environment: Any, msg: Any) -> None:
        self.received.setdefault(msg.node_id, []).extend(msg.data["samples"])

    def on_done(self, environment: Any, msg: Any) -> None:
        self.done[msg.node_id] = dict(msg.data)

    def test_start(self) -> None:
        if self.started:
            return
        self.started = True
        self.setup_started = time.time()
        from rally_keystone_bench.clients import credentials
        from rally_keystone_bench.clients.admin import AdminClient
        from rally_keystone_bench.engines.locust import setup

        self.workers = _node_ids(self.runner)
        steps = steps_from(self.opts)
        try:
            schedule.check(steps, self.opts.ks_arrival, max(1, len(self.workers)))
            if self.opts.num_users < len(self.workers):
                raise ValueError(
                    f"-u {self.opts.num_users} users for {len(self.workers)} workers: "
                    "every worker needs one at least"
                )
            self.admin = AdminClient(credentials.from_environ(os.environ), pool_size=8)
            self.prepared = setup.prepare(self.admin, self.opts.ks_keystone_users)
        except Exception as exc:  # reported in run.json and on stderr
            self.error = f"preparing the load: {exc}"
            gevent.spawn(self.finish)
            return
        auth_url = self.admin.base_url
        LOG.info(
            "keystone-bench: %d users made; plans to %d workers",
            len(self.prepared.users),
            len(self.workers),
        )
        for index, node in enumerate(self.workers):
            plan = {
                "index": index,
                "workers": len(self.workers),
                "auth_url": auth_url,
                "users": self.prepared.credentials(),
                "options": worker_options(self.opts),
            }
            self.runner.send_message("ks_plan", plan, client_id=node)
        gevent.spawn(self.coordinate)

    def _missing(self, waiting: list[str]) -> list[str]:
        clients = self.runner.clients
        return [n for n in waiting if n not in clients or clients[n].state == STATE_MISSING]

    def coordinate(self) -> None:
        opts = self.opts
        deadline = time.monotonic() + opts.ks_ready_timeout
        while len(self.ready) < len(self.workers):
            if self.interrupted:
                return self.finish()
            waiting = [n for n in self.workers if n not in self.ready]
            gone = self._missing(waiting)
            if gone or time.monotonic() > deadline:
                self.lost = gone or waiting
                self.error = f"worker(s) {', '.join(self.lost)} never got ready"
                self.broadcast("ks_stop", {})
                return self.finish()
            gevent.sleep(0.05)
        self.t0 = time.time() + 1.0
        self.broadcast("ks_go", {"t0": self.t0})
        LOG.info("keystone-bench: every worker ready (%s users): load starts", self.ready)
        total = sum(s.seconds for s in steps_from(opts))
        deadline = time.monotonic() + 1.0 + total + max(30.0, opts.ks_timeout + 10.0)
        # A lost worker's samples are gone; the others' are still coming: wait for them.
        while len(self.done) + len(self.lost) < len(self.workers):
            waiting = [n for n in self.workers if n not in self.done and n not in self.lost]
            gone = self._missing(waiting)
            if time.monotonic() > deadline:
                gone = waiting
            self.lost += gone
            gevent.sleep(0.1)
        if self.lost and not self.interrupted:
            self.error = (
                f"lost {len(self.lost)} of {len(self.workers)} worker(s) "
                f"({', '.join(self.lost)}): their samples are missing, the others' are kept"
            )
        self.finish()

    def broadcast(self, name: str, data: dict) -> None:
        for node in self.workers:
            if node in self.runner.clients:
                self.runner.send_message(name, data, client_id=node)

    def teardown(self) -> None:
        from rally_keystone_bench.engines.locust import setup

        if self.prepared is not None and self.left_behind is None:
            prepared, self.prepared = self.prepared, None
            self.left_behind = setup.teardown(self.admin, prepared)

    def finish(self) -> None:
        try:
            self.teardown()
            self.write()
        except Exception as exc:  # still quit: never leave the run hanging
            LOG.error("keystone-bench: writing the results failed: %s", exc)
            self.error = self.error or f"writing the results: {exc}"
        finally:
            self.env.process_exit_code = 2 if self.error else 0
            if self.error:
                LOG.error("keystone-bench: %s", self.error)
            self.runner.quit()

    def write(self) -> None:
        opts = self.opts
        self.out.mkdir(parents=True, exist_ok=True)
        everything = [s for node in self.workers for s in self.received.get(node, [])]
        everything.sort(key=lambda s: s[2])
        (self.out / "samples.json").write_text(json.dumps(everything))
        steps = steps_from(opts)
        kept = everything
        if self.t0 is not None and opts.ks_warmup and not opts.ks_steps:
            begin = self.t0 + opts.ks_warmup - 0.5 / opts.ks_rate  # half a spacing: rounding
            kept = [s for s in everything if s[2] >= begin]
        reported = sum(int(d.get("count", 0)) for d in self.done.values())
        per_worker = {
            node: {
                "index": i,
                "reported": self.done.get(node, {}).get("count"),
                "received": len(self.received.get(node, [])),
                "users": self.ready.get(node),
                "late_sends": self.done.get(node, {}).get("late"),
                "stopped_in_step": self.done.get(node, {}).get("stopped_in_step"),
            }
            for i, node in enumerate(self.workers)
        }
        runner_cfg: dict[str, Any] = {
            "rps": opts.ks_rate if not opts.ks_steps else [[s.rate, s.seconds] for s in steps],
            "times": schedule.planned_count(steps, opts.ks_arrival),
            "workers": len(self.workers),
            "users": opts.num_users,
            "arrival": opts.ks_arrival,
            "warmup": opts.ks_warmup,
            "duration": opts.ks_duration if not opts.ks_steps else sum(s.seconds for s in steps),
            "http": opts.ks_http,
        }
        failed = sum(1 for s in kept if s[6])
        requests = {s[0] for s in kept}
        failed_requests = {s[0] for s in kept if s[6]}
        sla = [
            sm.failure_rate_sla(len(failed_requests), len(requests)),
            sm.complete_sla(self.lost, reported, len(everything)),
        ]
        window = None
        if self.t0 is not None and kept:
            begin = self.t0 + (opts.ks_warmup if not opts.ks_steps else 0.0)
            window = (min(s[3] for s in kept), max(s[4] for s in kept))
            window = (min(window[0], begin), window[1])
        report = sm.rally_report(
            kept,
            scenario=opts.ks_scenario,
            runner=runner_cfg,
            contexts={"keystone_users": {"users": opts.ks_keystone_users}},
            sla_results=sla,
            load_window=window,
            # users made, plans sent, every worker's tokens issued: the go is 1 s later
            setup=(self.setup_started, self.t0 - 1.0) if self.t0 and self.setup_started else None,
        )
        (self.out / "locust-report.json").write_text(json.dumps(report))
        meta = {
            "scenario": opts.ks_scenario,
            "runner": runner_cfg,
            "t0": self.t0,
            "workers": per_worker,
            "lost": self.lost,
            "samples_total": len(everything),
            "samples_reported": reported,
            "samples_in_report": len(kept),
            "failed_samples": failed,
            "left_behind": self.left_behind,
            "admin_retries": self.admin.stats.describe() if self.admin else None,
            "error": self.error,
            "interrupted": self.interrupted,
        }
        (self.out / "run.json").write_text(json.dumps(meta, indent=1) + "\n")


# -- worker --------------------------------------------------------------------
class _Stamp:
    """Entered around exactly the one HTTP request (TokenClient's timer)."""

    __slots__ = ("sent", "answered")

    def __init__(self) -> None:
        self.sent = self.answered = None

    def __call__(self) -> _Stamp:
        return self

    def __enter__(self) -> _Stamp:
        self.sent = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> bool:
        self.answered = time.perf_counter()
        return False


class Worker:
    """One worker's plan, token pool, schedule and samples."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.runner: WorkerRunner = env.runner
        self.plan: dict | None = None
        self.pool: dict[int, list] = {}
        self.pool_ready = Event()
        self.go = Event()
        self.dispatcher: schedule.Dispatcher | None = None
        self.samples: list[tuple] = []
        self.users_ready = 0
        self.users_done = 0
        self.next_user = itertools.count()
        self.sent_done = False
        self.wall0 = self.perf0 = 0.0
        self.late = 0
        self.t0 = 0.0
        self.end = float("inf")
        self.cutoff: float | None = None  # no request due at or after this is sent
        self.stopped_in_step: int | None = None
        self.runner.register_message("ks_plan", self.on_plan)
        self.runner.register_message("ks_go", self.on_go)
        self.runner.register_message("ks_stop", self.on_stop)

    @property
    def opts(self) -> Any:
        return self.env.parsed_options

    @property
    def expected_users(self) -> int:
        """Users the master gave this worker (a worker never fires spawning_complete)."""
        return int(self.runner.target_user_count or 0)

    def epoch(self, perf: float) -> float:
        return self.wall0 + (perf - self.perf0)

    def client(self) -> Any:
        from rally_keystone_bench.clients.tokens import TokenClient

        assert self.plan is not None
        url = self.plan["auth_url"]
        if self.opts.ks_http == "gevent":
            from rally_keystone_bench.engines.locust.http import GeventSession

            return TokenClient(url, session=GeventSession(url, self.opts.ks_timeout))
        return TokenClient(url, pool_size=1, timeout=self.opts.ks_timeout)

    def on_plan(self, environment: Any, msg: Any) -> None:
        self.plan = dict(msg.data)
        # Locust hands the master's options to a worker with its spawn message,
        # which may come after the plan: until then a worker's --ks-scenario is
        # the default (validate), and it issued a validate pool (32 tokens) in an
        # authenticate run. The plan carries them, so prepare() sees the master's.
        vars(self.opts).update(self.plan.get("options") or {})
        LOG.info(
            "keystone-bench: plan received: worker %d of %d",
            self.plan["index"],
            self.plan["workers"],
        )
        gevent.spawn(self.prepare)

    def prepare(self) -> None:
        assert self.plan is not None
        if self.opts.ks_scenario == "validate":
            client = self.client()
            for i, cred in enumerate(self.plan["users"]):
                auth = user_auth(cred)
                self.pool[i] = [
                    client.issue(auth, "password", "project", include_catalog=False).token
                    for _ in range(max(1, self.opts.ks_tokens_per_user))
                ]
        self.pool_ready.set()
        while not self.expected_users or self.users_ready < self.expected_users:
            gevent.sleep(0.02)
        self.runner.send_message("ks_ready", {"users": self.users_ready})

    def on_go(self, environment: Any, msg: Any) -> None:
        assert self.plan is not None
        self.wall0, self.perf0 = time.time(), time.perf_counter()
        t0 = self.perf0 + (float(msg.data["t0"]) - self.wall0)
        offsets = schedule.worker_offsets(
            steps_from(self.opts),
            self.opts.ks_arrival,
            self.plan["index"],
            self.plan["workers"],
            self.opts.ks_seed,
        )
        self.t0 = t0
        # the load ends with its schedule (and a grace): what is still unsent then
        # stays unsent (the generator fell behind; the report's count says by how much)
        total = sum(st.seconds for st in steps_from(self.opts))
        self.end = t0 + total * 1.1 + 1.0  # a little grace for late sends
        self.dispatcher = schedule.Dispatcher(offsets, t0)
        self.go.set()

    def degraded(self, due: float) -> None:
        """Stop at the end of the step that DUE falls in (--ks-stop-when-degraded)."""
        if self.cutoff is not None or not self.opts.ks_stop_when_degraded:
            return
        offset = due - self.t0
        for i, (_rate, begin, end) in enumerate(schedule.step_bounds(steps_from(self.opts))):
            if begin <= offset < end:
                self.cutoff, self.stopped_in_step = self.t0 + end, i
                LOG.info("keystone-bench: degraded in step %d: stopping at its end", i + 1)
                return

    def on_stop(self, environment: Any, msg: Any) -> None:
        self.dispatcher = None
        self.go.set()

    def user_done(self) -> None:
        self.users_done += 1
        if self.sent_done or self.users_done < (self.expected_users or 0):
            return
        self.sent_done = True
        for i in range(0, len(self.samples), CHUNK):
            self.runner.send_message("ks_samples", {"samples": self.samples[i : i + CHUNK]})
        self.runner.send_message(
            "ks_done",
            {
                "count": len(self.samples),
                "late": self.late,
                "stopped_in_step": self.stopped_in_step,
            },
        )


MASTER: Master | None = None
WORKER: Worker | None = None


@events.init.add_listener
def on_init(environment: Any, **_kw: Any) -> None:
    global MASTER, WORKER
    if isinstance(environment.runner, MasterRunner):
        MASTER = Master(environment)
    elif isinstance(environment.runner, WorkerRunner):
        WORKER = Worker(environment)


@events.test_start.add_listener
def on_test_start(environment: Any, **_kw: Any) -> None:
    if MASTER is not None:
        MASTER.test_start()


@events.quitting.add_listener
def on_quitting(environment: Any, **_kw: Any) -> None:
    if MASTER is not None:
        MASTER.teardown()  # interrupted: nothing left in Keystone


# -- the user ------------------------------------------------------------------
class KeystoneTokenUser(User):
    """One kept-alive connection taking its worker's due requests."""

    def on_start(self) -> None:
        w = WORKER
        if w is None:
            raise StopUser()  # run without a master: nothing to do
        w.pool_ready.wait()
        assert w.plan is not None
        n = next(w.next_user)
        self.index = n % len(w.plan["users"])
        self.auth = user_auth(w.plan["users"][self.index])
        self.tokens = itertools.cycle(w.pool.get(self.index) or [None])
        self.tk = w.client()
        if w.opts.ks_scenario != "authenticate":
            self.tk.authorize(self.auth, "project")  # its own X-Auth-Token, untimed
        self.tk.session.request(  # open the connection before any timer
            self.tk.base_url,
            "GET",
            headers={"Accept": "application/json"},
            authenticated=False,
            raise_exc=False,
            log=False,
        )
        w.users_ready += 1
        w.go.wait()

    @task
    def send_due(self) -> None:
        w = WORKER
        assert w is not None
        clock = time.perf_counter
        while w.dispatcher is not None:
            slot = w.dispatcher.next()
            if slot is None:
                break
            k, due = slot
            if (w.cutoff is not None and due >= w.cutoff) or clock() >= w.end:
                break
            sent = schedule.wait_until(due, clock, gevent.sleep)
            if sent - due > 0.001:
                w.late += 1
            if sent - due > LAG_LIMIT_S:
                w.degraded(due)
            self.one(w, k, due)
            if clock() - due > RAMP_LATENCY_S:
                w.degraded(due)  # the step holds 2 s of answers: saturated
        w.user_done()
        raise StopUser()

    def one(self, w: Worker, k: int, due: float) -> None:
        steps = calls.steps(w.opts.ks_scenario)
        intended = due
        token = None
        for action, verb in steps:
            stamp = _Stamp()
            status, error = 0, ""
            try:
                result = self.call(action, stamp, token)
                status = result.status
                if action == sm.ISSUE:
                    token = result.token
                if action == sm.REVOKE:  # untimed: the revoked token must be gone
                    error = calls.after_revocation(self.tk, w.opts.ks_scenario, token)
            except Exception as exc:  # TokenRequestError or a bug: one failed sample
                status = int(getattr(exc, "status", 0) or 0)
                error = f"{type(exc).__name__}: {exc}"
            now = time.perf_counter()
            sent = stamp.sent if stamp.sent is not None else now
            answered = stamp.answered if stamp.answered is not None else now
            w.samples.append(
                (k, action, w.epoch(intended), w.epoch(sent), w.epoch(answered), status, error)
            )
            w.env.events.request.fire(
                request_type=verb,
                name=action,
                response_time=(answered - sent) * 1000.0,
                response_length=0,
                exception=RuntimeError(error) if error else None,
                context={},
            )
            if error:
                w.degraded(due)
                return
            intended = answered  # the next action of the iteration is due now

    def call(self, action: str, stamp: _Stamp, token: Any) -> Any:
        scenario = WORKER.opts.ks_scenario  # type: ignore[union-attr]
        return calls.call(self.tk, self.auth, scenario, action, stamp, token, self.tokens)
