"""The Locust master: prepares Keystone, hands out the plan, collects the samples.

Users and projects are made with the admin client (OS_* variables) before
the load and deleted after it, on every path. What the master writes at the
end (the raw samples and run.json, not the report) is master_files.py's.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import gevent
from locust.runners import STATE_MISSING, MasterRunner

from rally_keystone_bench.engines.locust import master_files, schedule
from rally_keystone_bench.engines.locust.custom_args import steps_from
from rally_keystone_bench.engines.locust.setup import worker_options

LOG = logging.getLogger("keystone-bench")


def _node_ids(runner: MasterRunner) -> list[str]:
    nodes = runner.clients.ready + runner.clients.spawning + runner.clients.running
    return sorted(n.id for n in nodes)


class Master:
    """Prepares Keystone, hands out the plan, collects samples, writes them raw."""

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
        master_files.write(self)


current: Master | None = None  # this process's master (the locustfile's on_init)
