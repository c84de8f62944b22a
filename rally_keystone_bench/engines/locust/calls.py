"""What a Locust user sends for one iteration of each scenario, without Locust.

The locustfile's users call these; the unit tests call them too, beside the
Rally scenarios, to compare what the two engines send (Locust itself is not
imported here: importing it patches the process with gevent).
"""

from __future__ import annotations

from typing import Any

from rally_keystone_bench.clients.tokens import TokenRequestError
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


def after_revocation(tk: Any, scenario: str, token: Any) -> str:
    """The untimed end of a lifecycle iteration, as KeystoneTokens.lifecycle's.

    One more validation of the revoked TOKEN, with the catalog (so that
    Keystone's access log tells it from the timed ones), must answer 404.
    Returns the iteration's error, or "" (never the token itself).
    """
    if scenario != "lifecycle" or token is None:
        return ""
    try:
        result = tk.validate(token, include_catalog=True)
    except TokenRequestError as exc:
        return "" if exc.status == 404 else f"TokenRequestError: {exc}"
    status = result.status
    return f"RevokedTokenStillValid: the token still validates after revocation (HTTP {status})"
