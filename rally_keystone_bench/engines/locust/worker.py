"""A Locust worker: its plan, token pool and schedule, and the user that sends on time.

Each user holds one kept-alive connection and sends through TokenClient,
one timed request per action; a request that finds every user of its
worker busy goes out late and keeps its intended start. Every request's
sample (intended start, send, answer, status) goes back to the master
unrounded, in custom messages.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import Any

import gevent
from gevent.event import Event
from locust import User, task
from locust.exception import StopUser
from locust.runners import WorkerRunner

from rally_keystone_bench.engines.locust import calls, schedule
from rally_keystone_bench.engines.locust import samples as sm
from rally_keystone_bench.engines.locust.custom_args import steps_from
from rally_keystone_bench.engines.locust.setup import user_auth

LOG = logging.getLogger("keystone-bench")
CHUNK = 5000  # samples per message from a worker
LAG_LIMIT_S = 0.25  # a send this late: the step is degraded (probe_verdict.LAG_LIMIT_S)
RAMP_LATENCY_S = 2.0  # an answer this long after its due time, too (capacity.RAMP_LATENCY_S)


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


current: Worker | None = None  # this process's worker (the locustfile's on_init)


# -- the user ------------------------------------------------------------------
class KeystoneTokenUser(User):
    """One kept-alive connection taking its worker's due requests."""

    def on_start(self) -> None:
        w = current
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
        w = current
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
        scenario = current.opts.ks_scenario  # type: ignore[union-attr]
        return calls.call(self.tk, self.auth, scenario, action, stamp, token, self.tokens)
