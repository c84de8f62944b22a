"""The Locust engine's actions and scenarios: what a sample names and what a load runs.

A worker records one sample per request, a plain tuple that msgpack
carries to the master exactly (floats stay IEEE doubles; nothing is rounded
or bucketed): ``(request, action, intended, sent, answered, status,
error)``, laid out in ``report/locust_report.py``, which reads them. The
master writes them raw (``samples.json``); the Rally JSON report is
report/'s, built on the load host after the master exits (``engine.py``).
Here: the atomic action names a sample carries, and each ``--scenario``'s
Rally scenario and arguments, which the report names.
"""

from __future__ import annotations

from typing import Any

ISSUE = "keystone.issue_token"
VALIDATE = "keystone.validate_token"
CHECK = "keystone.check_token"
REVOKE = "keystone.revoke_token"

# --scenario -> (Rally scenario name, its arguments as our tasks give them)
SCENARIOS: dict[str, tuple[str, dict[str, Any]]] = {
    "authenticate": (
        "KeystoneTokens.authenticate",
        {"scope": "project", "method": "password", "include_catalog": True},
    ),
    "validate": (
        "KeystoneTokens.validate",
        {"method": "GET", "include_catalog": False, "repetitions": 1},
    ),
    "lifecycle": ("KeystoneTokens.lifecycle", {"validations": 1, "check": True, "revoke": True}),
}


def issue_catalog(scenario: str) -> bool:
    """Whether SCENARIO's timed issue asks for the catalog, as its Rally scenario does.

    authenticate: its include_catalog argument; lifecycle: always, as
    KeystoneTokens.lifecycle issues with TokenClient's default.
    """
    return bool(SCENARIOS[scenario][1].get("include_catalog", True))
