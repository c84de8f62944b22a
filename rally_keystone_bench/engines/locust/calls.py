"""What a Locust user sends for one iteration of each scenario, without Locust.

The locustfile's users call these; the unit tests call them too, beside the
Rally scenarios, to compare what the two engines send (Locust itself is not
imported here: importing it patches the process with gevent).
"""

from __future__ import annotations

from typing import Any

from rally_keystone_bench.engines.locust import samples as sm


def steps(scenario: str) -> list[tuple[str, str]]:
    """The timed actions of one iteration of SCENARIO, with their HTTP methods."""
    if scenario == "authenticate":
        return [(sm.ISSUE, "POST")]
    if scenario == "validate":
        return [(sm.VALIDATE, "GET")]
    return [(sm.ISSUE, "POST"), (sm.VALIDATE, "GET"), (sm.CHECK, "HEAD"), (sm.REVOKE, "DELETE")]


def call(tk: Any, auth: Any, scenario: str, action: str, timer: Any, token: Any, pool: Any) -> Any:
    """One timed request through TokenClient TK: ACTION of SCENARIO.

    TOKEN is the token this iteration issued (lifecycle), else the next
    one of POOL (validate's pre-issued tokens).
    """
    if action == sm.ISSUE:
        catalog = sm.issue_catalog(scenario)
        return tk.issue(auth, "password", "project", catalog, timer=timer)
    subject = token if token is not None else next(pool)
    if action == sm.VALIDATE:
        return tk.validate(subject, include_catalog=False, timer=timer)
    if action == sm.CHECK:
        return tk.check(subject, timer=timer)
    return tk.revoke(subject, timer=timer)
