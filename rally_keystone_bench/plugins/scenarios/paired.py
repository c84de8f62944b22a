"""KeystoneTokens.paired: one request to each of two Keystones per iteration.

The gate's measurement. Both deployments are up; each iteration sends the
same request to the baseline and to the candidate, in random order, each
timed as its own atomic action named after its side
(``baseline.keystone.issue_token``, ``candidate.keystone.issue_token``), so
both sides see the same machine within a second of each other. The targets
are the two deployments' ``openrc`` files (mode 0600): the task and Rally's
report name a path, never a password.

    rally task start tasks/gate.yaml \\
        --task-args '{"baseline": "A/openrc", "candidate": "B/openrc"}'
"""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path
from typing import Any

from rally.task import validation
from rally_openstack.task import scenario

from rally_keystone_bench.clients import credentials
from rally_keystone_bench.clients.auth import SCOPES, UserAuth
from rally_keystone_bench.clients.pool import shared_client
from rally_keystone_bench.clients.tokens import Token, TokenRequestError
from rally_keystone_bench.plugins.scenarios.tokens import ISSUE, MIN_TTL, VALIDATE, _TokenScenario

SIDES = ("baseline", "candidate")
ACTIONS = {"issue": ISSUE, "validate": VALIDATE}

_TARGETS: dict[str, dict[str, Any]] = {}
_TOKENS: dict[tuple, Token] = {}
_LOCK = threading.Lock()
_ORDER = random.Random()


def side_action(side: str, action: str) -> str:
    """The atomic action name of ACTION on SIDE: ``candidate.keystone.issue_token``."""
    return f"{side}.{action}"


def read_openrc(path: str) -> dict[str, Any]:
    """The credential in an openrc file (read once per process)."""
    with _LOCK:
        found = _TARGETS.get(path)
        if found is None:
            found = _TARGETS[path] = credentials.from_openrc(Path(path))
        return found


@validation.add("enum", param_name="action", values=list(ACTIONS), missed=True)
@validation.add("enum", param_name="scope", values=list(SCOPES), missed=True)
@validation.add("file_exists", param_name="baseline")
@validation.add("file_exists", param_name="candidate")
@scenario.configure(name="KeystoneTokens.paired", platform="openstack")
class Paired(_TokenScenario):
    def run(
        self,
        baseline: str,
        candidate: str,
        action: str = "issue",
        scope: str = "project",
        include_catalog: bool = True,
    ) -> None:
        """The same token request to the baseline and to the candidate, in random order.

        Each side's admin (from its openrc) issues a password token, or
        validates a token issued before any timer; each request is timed
        as ``<side>.keystone.issue_token`` or ``<side>.keystone.validate_token``.
        A failed request does not stop the other side's: the iteration
        fails after both were sent.

        :param baseline: the baseline deployment's openrc file
        :param candidate: the candidate deployment's openrc file
        :param action: issue or validate
        :param scope: issue: project, domain, system or unscoped
        :param include_catalog: issue: ask for the catalog
        """
        targets = {"baseline": baseline, "candidate": candidate}
        order = list(SIDES)
        _ORDER.shuffle(order)
        errors: list[TokenRequestError] = []
        for side in order:
            credential = read_openrc(targets[side])
            try:
                if action == "issue":
                    self._issue(side, credential, scope, include_catalog)
                else:
                    self._validate(side, credential)
            except TokenRequestError as exc:
                errors.append(exc)
        self._report(
            "Paired requests",
            f"{action}: first side of the pair",
            candidate_first=float(order[0] == "candidate"),
        )
        if errors:
            raise errors[0]

    def _issue(self, side: str, credential: dict, scope: str, include_catalog: bool) -> None:
        client = shared_client(credential, purpose="paired-issue", per_thread=False)
        auth = UserAuth.from_credential(credential)
        client.issue(
            auth,
            "password",
            scope,
            include_catalog,
            timer=self._timer(side_action(side, ISSUE)),
        )

    def _validate(self, side: str, credential: dict) -> None:
        client = shared_client(credential, purpose="paired-validate", per_thread=False)
        auth = UserAuth.from_credential(credential)
        client.authorize(auth, scope="project", min_ttl=MIN_TTL)
        key = (os.getpid(), credential["auth_url"])
        with _LOCK:
            token = _TOKENS.get(key)
            left = token.seconds_left() if token else None
            if token is None or (left is not None and left < MIN_TTL):
                token = client.issue(auth, "password", "project", include_catalog=False).token
                assert token is not None
                _TOKENS[key] = token
        timer = self._timer(side_action(side, VALIDATE))
        client.validate(token, include_catalog=False, timer=timer)
