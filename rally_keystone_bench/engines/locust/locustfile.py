"""The Locust engine's locustfile: ``locust -f <this file> --master`` and ``--worker``.

Run it the way Locust users expect::

    # master (this host): prepares users, waits for 2 workers, writes the samples
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
the master unrounded (custom messages); the master writes the raw material,
``samples.json`` and ``run.json`` (what each holds: master_files.py). The
Rally JSON report of the samples after the warm-up, ``locust-report.json``,
is built from them after the master exits, by report/locust_report.py:
``keystone-bench load`` does it on its own, and ``keystone-bench report
OUT/locust-report.json`` after a master started by hand.

Users, projects and tokens are made on the master with the admin client
(OS_* variables), before the load, and deleted after it, on every path.

This file is what ``locust -f`` loads: it registers our options and events
and names the user class; the parts are ``custom_args`` (the ``--ks-*``
options), ``master`` (and ``master_files``, what it writes) and ``worker``
(and its user). Locust finds the user class, ``KeystoneTokenUser``, among
this file's names.
"""

from __future__ import annotations

from typing import Any

from locust import events
from locust.runners import MasterRunner, WorkerRunner

from rally_keystone_bench.engines.locust import custom_args, master, worker
from rally_keystone_bench.engines.locust.worker import KeystoneTokenUser  # noqa: F401

events.init_command_line_parser.add_listener(custom_args.add_options)


@events.init.add_listener
def on_init(environment: Any, **_kw: Any) -> None:
    if isinstance(environment.runner, MasterRunner):
        master.current = master.Master(environment)
    elif isinstance(environment.runner, WorkerRunner):
        worker.current = worker.Worker(environment)


@events.test_start.add_listener
def on_test_start(environment: Any, **_kw: Any) -> None:
    if master.current is not None:
        master.current.test_start()


@events.quitting.add_listener
def on_quitting(environment: Any, **_kw: Any) -> None:
    if master.current is not None:
        master.current.teardown()  # interrupted: nothing left in Keystone
