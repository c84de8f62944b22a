"""A test-only scenario: one timed POST /v3/auth/tokens per iteration, as the admin.

Loaded with ``rally --plugin-paths`` by tests/functional/test_sla_mock.py until
the KeystoneTokens scenarios exist; the session (and its connection) is kept
per runner process, so the atomic action times exactly one HTTP request.
"""

from __future__ import annotations

import requests
from rally.task import atomic, scenario, validation

_SESSION: dict[int, requests.Session] = {}


@validation.add("required_platform", platform="openstack", admin=True)
@scenario.configure(name="KtbTest.issue_token", platform="openstack")
class IssueToken(scenario.Scenario):
    def run(self) -> None:
        platform = self.context["env"]["platforms"]["openstack"]
        cred = dict(platform["admin"])
        auth_url = cred.get("auth_url") or platform["auth_url"]
        project = cred.get("tenant_name") or cred.get("project_name")
        body = {
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {
                            "name": cred["username"],
                            "password": cred["password"],
                            "domain": {"name": cred.get("user_domain_name") or "Default"},
                        }
                    },
                },
                "scope": {
                    "project": {
                        "name": project,
                        "domain": {"name": cred.get("project_domain_name") or "Default"},
                    }
                },
            }
        }
        session = _SESSION.setdefault(0, requests.Session())
        url = auth_url.rstrip("/") + "/auth/tokens?nocatalog"
        with atomic.ActionTimer(self, "keystone.issue_token"):
            resp = session.post(url, json=body, timeout=30)
        if resp.status_code != 201:
            raise RuntimeError(f"token issue answered HTTP {resp.status_code}")
