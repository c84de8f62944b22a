"""Both engines send Keystone the same token requests, for every Locust scenario.

Rally's side: the KeystoneTokens scenario and arguments the capacity probe
task renders for the scenario, run against a recording fake Keystone. The
Locust engine's side: its users' calls (engines/locust/calls.py) through
either of its HTTP stacks (--ks-http gevent | keystoneauth), against the
same fake. Compared: each timed request's method, path and query, headers
(token values aside) and body; and every request from the first timed one
to the iteration's end, timed or not (lifecycle's validation of the
revoked token).
"""

from __future__ import annotations

import contextlib
import http.client
import itertools

import pytest
import yaml
from fake_keystone import FakeKeystone, serving
from rally import api
from rally_openstack.common.credential import OpenStackCredential

from rally_keystone_bench import shipped
from rally_keystone_bench.clients import pool
from rally_keystone_bench.clients.session import DirectSession
from rally_keystone_bench.clients.tokens import TokenClient
from rally_keystone_bench.driver import probe_args
from rally_keystone_bench.engines.locust import calls, setup
from rally_keystone_bench.engines.locust import samples as sm
from rally_keystone_bench.plugins.scenarios import tokens as scenarios
from rally_keystone_bench.verdicts import capacity

NAMES = {"username": "kb-u0", "password": "pw-24-characters-long-xx", "project_name": "kb-p"}
SCENARIO_CLASSES = {
    "KeystoneTokens.authenticate": scenarios.Authenticate,
    "KeystoneTokens.validate": scenarios.Validate,
    "KeystoneTokens.lifecycle": scenarios.Lifecycle,
}
HTTP_STACKS = ("gevent", "keystoneauth")  # the --ks-http choices (custom_args.py)
TOKEN_HEADERS = ("x-auth-token", "x-subject-token")


@pytest.fixture(scope="module", autouse=True)
def rally_options():
    from rally.common import opts

    opts.register()
    opts.register_options_from_path("rally_openstack.common.cfg.opts:list_opts")


@pytest.fixture
def keystone():
    with serving(FakeKeystone()) as server:
        yield server
    pool.clear()


def probe_workload(scenario: str) -> tuple[str, dict]:
    """The scenario name and arguments Rally's engine runs for SCENARIO (the probe task)."""
    path = shipped.probe_task_path()
    settings = capacity.Settings(
        scenario=scenario, low=5, high=5, warmup=5, window=30, max_slope=1e6, precision=1
    )
    args = probe_args.task_args(settings, 5)
    text = api._Task(None).render_template(path.read_text(), str(path.parent), **args)
    ((name, args),) = yaml.safe_load(text)["subtasks"][0]["scenario"].items()
    return name, args


def shape(request: dict) -> tuple:
    """A request as Keystone sees it, token values replaced by their presence."""
    headers = {k.lower(): v for k, v in request["headers"].items()}
    for name in TOKEN_HEADERS:
        if name in headers:
            headers[name] = "<token>"
    return request["method"], request["path"], sorted(headers.items()), request["body"]


class Recorder:
    """A timer factory: the requests the fake received inside each timed action."""

    def __init__(self, server: FakeKeystone) -> None:
        self.server = server
        self.timed: list[tuple[str, dict]] = []
        self.first: int | None = None  # the first timed request's index

    def timer(self, name: str):
        @contextlib.contextmanager
        def timed():
            first = len(self.server.requests)
            self.first = first if self.first is None else self.first
            yield
            self.timed += [(name, r) for r in self.server.requests[first:]]

        return timed

    def since_first_timed(self) -> list[tuple]:
        return [shape(r) for r in self.server.requests[self.first :]]


Requests = tuple[list[tuple[str, tuple]], list[tuple]]  # timed (action, shape); all since


def rally_requests(server: FakeKeystone, scenario: str) -> Requests:
    name, args = probe_workload(scenario)
    url = server.url
    user = OpenStackCredential(
        auth_url=url, user_domain_name="Default", project_domain_name="Default", **NAMES
    )
    admin = OpenStackCredential(auth_url=url, username="admin", password="a", project_name="admin")
    context = {
        "user": {"id": "u1", "credential": user},
        "tenant": {"id": "p1"},
        "admin": {"credential": admin},
        "iteration": 1,
        "task": {"uuid": "task"},
        "owner_id": "workload",
        "config": {},
    }
    recorder = Recorder(server)
    scenario_obj = SCENARIO_CLASSES[name](context)
    scenario_obj._timer = recorder.timer
    scenario_obj.run(**args)
    return [(action, shape(r)) for action, r in recorder.timed], recorder.since_first_timed()


def locust_requests(server: FakeKeystone, scenario: str, stack: str) -> Requests:
    # what setup.prepare hands a worker for one user, and how a worker's user sends
    cred = {"user_id": "u1", "project_id": "p1", "domain_name": "Default", **NAMES}
    auth = setup.user_auth(cred)
    if stack == "gevent":
        from rally_keystone_bench.engines.locust.http import GeventSession

        tk = TokenClient(server.url, session=GeventSession(server.url))
    else:
        tk = TokenClient(server.url, pool_size=1, timeout=60.0)
    tokens = itertools.cycle([tk.issue(auth, "password", "project", include_catalog=False).token])
    if scenario != "authenticate":
        tk.authorize(auth, "project")
    recorder = Recorder(server)
    token = None
    for action, _verb in calls.steps(scenario):
        result = calls.call(tk, auth, scenario, action, recorder.timer(action), token, tokens)
        if action == sm.ISSUE:
            token = result.token
        if action == sm.REVOKE:  # as the locustfile's user does
            assert calls.after_revocation(tk, scenario, token) == ""
    return [(action, shape(r)) for action, r in recorder.timed], recorder.since_first_timed()


@pytest.mark.parametrize("stack", HTTP_STACKS)
@pytest.mark.parametrize("scenario", sorted(sm.SCENARIOS))
def test_both_engines_send_the_same_timed_requests(keystone, scenario, stack):
    rally, rally_all = rally_requests(keystone, scenario)
    locust, locust_all = locust_requests(keystone, scenario, stack)
    assert len({a for a, _ in rally}) == len(rally)  # one request per timed action
    assert len({a for a, _ in locust}) == len(locust)
    assert [a for a, _ in locust] == [a for a, _ in rally]
    rally_by, locust_by = dict(rally), dict(locust)
    for action, request in rally_by.items():
        assert locust_by[action] == request, action
    assert locust_all == rally_all  # the untimed ones too, in the same order


def test_a_revoked_token_that_still_validates_fails_the_locust_iteration(keystone):
    keystone.honour_revocation = False  # a Keystone whose revocation does not take
    cred = {"user_id": "u1", "project_id": "p1", "domain_name": "Default", **NAMES}
    auth = setup.user_auth(cred)
    tk = TokenClient(keystone.url, pool_size=1, timeout=60.0)
    token = tk.issue(auth, "password", "project", include_catalog=True).token
    tk.authorize(auth, "project")
    tk.revoke(token)
    error = calls.after_revocation(tk, "lifecycle", token)
    assert error.startswith("RevokedTokenStillValid: ") and token.value not in error
    assert calls.after_revocation(tk, "authenticate", token) == ""  # lifecycle's only


@pytest.mark.parametrize("scenario", sorted(sm.SCENARIOS))
def test_the_locust_scenarios_name_the_probe_tasks_workload(scenario):
    name, args = probe_workload(scenario)
    assert sm.SCENARIOS[scenario] == (name, args)


def test_the_direct_session_writes_head_and_body_in_one_send(keystone, monkeypatch):
    sends: list[bytes] = []
    real = http.client.HTTPConnection.send

    def send(self, data):
        sends.append(bytes(data))
        return real(self, data)

    monkeypatch.setattr(http.client.HTTPConnection, "send", send)
    client = TokenClient(keystone.url, session=DirectSession(keystone.url))
    client.issue(setup.user_auth({"domain_name": "Default", **NAMES}))
    assert len(sends) == 1
    head, _, body = sends[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v3/auth/tokens HTTP/1.1")
    assert b"Accept-Encoding: identity" in head
    assert body.startswith(b'{"auth": {"identity"') and body.endswith(b"}}}")
