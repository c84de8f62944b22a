"""KeystoneTokens scenarios against a small stateful Keystone run by the test.

What is checked: the atomic actions each run records, the requests the
server received for them (one per timed action), connections kept across
iterations, and the argument validators `rally task validate` runs.
"""

from __future__ import annotations

import threading

import pytest
import rally.plugins.common.validators  # noqa: F401  (registers "enum", "number")
import validation_cases
from fake_keystone import FakeKeystone, serving
from rally.task import scenario as rally_scenario
from rally_openstack.common.credential import OpenStackCredential

from rally_keystone_bench.clients import pool
from rally_keystone_bench.plugins.scenarios import tokens as scenarios
from rally_keystone_bench.plugins.scenarios import validators  # noqa: F401


@pytest.fixture(scope="module", autouse=True)
def rally_options():
    """The [openstack] options OpenStackScenario reads, as rally registers them."""
    from rally.common import opts

    opts.register()
    opts.register_options_from_path("rally_openstack.common.cfg.opts:list_opts")


@pytest.fixture
def keystone():
    with serving(FakeKeystone()) as server:
        yield server
    pool.clear()


def _context(keystone: FakeKeystone, admin: bool = True, iteration: int = 1) -> dict:
    url = f"http://127.0.0.1:{keystone.server_address[1]}/v3"
    user = OpenStackCredential(
        auth_url=url, username="alice", password="alice-pw", project_name="demo"
    )
    context = {
        "user": {"id": "u1", "credential": user},
        "tenant": {"id": "p1"},
        "iteration": iteration,
        "task": {"uuid": "task"},
        "owner_id": "workload",
        "config": {},
    }
    if admin:
        context["admin"] = {
            "credential": OpenStackCredential(
                auth_url=url, username="admin", password="admin-pw", project_name="admin"
            )
        }
    return context


def _names(actions: list[dict]) -> list[str]:
    return [a["name"] for a in actions]


def test_authenticate_times_one_request_and_keeps_its_connection(keystone):
    for iteration in (1, 2, 3):
        scenario = scenarios.Authenticate(_context(keystone, iteration=iteration))
        scenario.run()
        (action,) = scenario.atomic_actions()
        assert action["name"] == "keystone.issue_token"
        assert action["started_at"] < action["finished_at"]
        assert "failed" not in action
    assert keystone.count("POST") == 3
    assert keystone.count("GET", "/v3") == 1  # opened once, before any timer
    assert keystone.connections == 1


def test_authenticate_fresh_connection_opens_a_connection_per_token(keystone):
    for iteration in (1, 2, 3):
        scenarios.Authenticate(_context(keystone, iteration=iteration)).run(fresh_connection=True)
    assert keystone.count("POST") == 3
    assert keystone.connections == 3


def test_authenticate_rescope_issues_its_source_token_once(keystone):
    for iteration in (1, 2, 3):
        scenario = scenarios.Authenticate(_context(keystone, iteration=iteration))
        scenario.run(method="token")
        assert _names(scenario.atomic_actions()) == ["keystone.issue_token"]
    assert keystone.count("POST") == 1 + 3


def test_concurrent_rescopes_issue_one_source_token_between_them(keystone):
    def iteration() -> None:
        scenarios.Authenticate(_context(keystone)).run(method="token")

    _in_threads(rounds=2, at_once=4, iteration=iteration)
    assert keystone.count("POST") == 1 + 8


def test_validate_times_each_validation_and_issues_its_token_before(keystone):
    scenario = scenarios.Validate(_context(keystone))
    scenario.run(repetitions=3)
    assert _names(scenario.atomic_actions()) == ["keystone.validate_token"] * 3
    assert keystone.count("GET") == 3
    assert keystone.count("POST") == 2  # the admin's X-Auth-Token, the token validated


def _in_threads(rounds: int, at_once: int, iteration) -> None:
    """Rally's rps runner: every iteration in a thread of its own.

    The threads stay alive to the end, so that no two share an identity
    (CPython reuses a finished thread's).
    """
    end = threading.Event()
    finished = threading.Semaphore(0)
    every = []

    def run() -> None:
        try:
            iteration()
        finally:
            finished.release()
            end.wait()

    for _ in range(rounds):
        threads = [threading.Thread(target=run) for _ in range(at_once)]
        every += threads
        for thread in threads:
            thread.start()
        for _ in threads:
            finished.acquire()
    end.set()
    for thread in every:
        thread.join()


def test_a_thread_per_iteration_reuses_clients_admin_token_and_connections(keystone):
    done = []

    def iteration() -> None:
        scenario = scenarios.Validate(_context(keystone))
        scenario.run()
        done.append(_names(scenario.atomic_actions()))

    _in_threads(rounds=5, at_once=3, iteration=iteration)
    assert done == [["keystone.validate_token"]] * 15
    # 15 user tokens to validate, and one admin token for the process: a new
    # client (one per concurrent iteration) takes the token the others hold.
    assert keystone.count("POST") == 15 + 1
    assert keystone.connections <= 2 * 3


def test_a_failed_iteration_gives_its_clients_back(keystone):
    keystone.honour_revocation = False  # every lifecycle iteration fails
    for _ in range(3):
        with pytest.raises(scenarios.RevokedTokenStillValid):
            scenarios.Lifecycle(_context(keystone)).run()
    assert keystone.count("POST") == 1 + 3  # still the one admin token
    assert keystone.connections == 2  # the issuer's and the validator's


def test_validate_with_head_checks(keystone):
    scenario = scenarios.Validate(_context(keystone))
    scenario.run(method="HEAD", repetitions=2)
    assert _names(scenario.atomic_actions()) == ["keystone.check_token"] * 2
    assert keystone.count("HEAD") == 2 and keystone.count("GET") == 0


def test_validate_without_an_admin_uses_the_users_own_token(keystone):
    scenario = scenarios.Validate(_context(keystone, admin=False))
    scenario.run()
    assert _names(scenario.atomic_actions()) == ["keystone.validate_token"]


def test_validate_takes_tokens_from_the_token_pool(keystone, monkeypatch):
    from rally_keystone_bench.plugins.contexts import token_pool

    context = _context(keystone)
    taken = []

    def next_token(ctx, client):
        assert ctx is context
        client = client() if callable(client) else client  # an issuer only when needed
        result = client.issue(
            scenarios.UserAuth(username="alice", password="alice-pw", project_name="demo")
        )
        taken.append(result.token.id)
        return result.token.value

    monkeypatch.setattr(token_pool, "next_token", next_token)
    context["token_pool"] = {"tokens": {}}
    scenario = scenarios.Validate(context)
    scenario.run(repetitions=3)
    assert len(taken) == 3
    assert _names(scenario.atomic_actions()) == ["keystone.validate_token"] * 3


def _issued_before(keystone: FakeKeystone, username: str, project: str) -> scenarios.Token:
    client = scenarios.TokenClient(f"http://127.0.0.1:{keystone.server_address[1]}/v3")
    auth = scenarios.UserAuth(username=username, password=f"{username}-pw", project_name=project)
    return client.issue(auth, "password", "project", include_catalog=False).token


def test_validate_sends_no_token_issue_when_the_context_prepared_them(keystone, monkeypatch):
    """The token_pool context issues the validator's token before the load:
    concurrent iterations (each leasing a client of its own) issue none."""
    from rally_keystone_bench.plugins.contexts import token_pool

    admin_token = _issued_before(keystone, "admin", "admin")
    user_token = _issued_before(keystone, "alice", "demo")
    monkeypatch.setattr(token_pool, "next_token", lambda ctx, client: user_token.value)
    before = keystone.count("POST")
    done = []

    def iteration() -> None:
        context = _context(keystone)
        credential, auth, scope = pool.validator_auth(context)
        key = pool.auth_token_key(credential, auth, scope)
        context["token_pool"] = {"tokens": {}, "auth_tokens": {key: admin_token}}
        scenario = scenarios.Validate(context)
        scenario.run()
        done.append(_names(scenario.atomic_actions()))

    _in_threads(rounds=3, at_once=3, iteration=iteration)
    assert done == [["keystone.validate_token"]] * 9
    assert keystone.count("GET", "/v3/auth/tokens") == 9
    assert keystone.count("POST") == before  # no token issued during the load


def test_a_failed_validation_fails_its_atomic_action(keystone):
    keystone.honour_revocation = True
    scenario = scenarios.Validate(_context(keystone))
    real_issue = scenarios.TokenClient.issue
    calls = []

    def issue_then_revoke(self, auth, *args, **kwargs):
        result = real_issue(self, auth, *args, **kwargs)
        calls.append(result)
        if len(calls) == 2:  # the token to validate: make it unknown
            keystone.revoked.add(result.token.value)
        return result

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scenarios.TokenClient, "issue", issue_then_revoke)
        with pytest.raises(scenarios.TokenRequestError) as caught:
            scenario.run()
    assert caught.value.status == 404
    (action,) = scenario.atomic_actions()
    assert action["name"] == "keystone.validate_token" and action["failed"]


def test_concurrent_create_nests_each_request_in_one_burst(keystone):
    scenario = scenarios.ConcurrentCreate(_context(keystone))
    scenario.run(count=9, parallel=3)
    (burst,) = scenario.atomic_actions()
    assert burst["name"] == "keystone.token_burst"
    children = burst["children"]
    assert _names(children) == ["keystone.issue_token"] * 9
    assert burst["started_at"] == children[0]["started_at"]
    assert burst["finished_at"] == max(c["finished_at"] for c in children)
    assert keystone.count("POST") == 9
    # 3 connections opened before the burst, reused by its 9 requests
    assert keystone.connections == 3
    titles = [o["title"] for o in scenario._output["additive"]]
    assert titles == ["Burst wall time", "Burst throughput"]


def test_lifecycle_times_issue_validations_and_revoke(keystone):
    scenario = scenarios.Lifecycle(_context(keystone))
    scenario.run(validations=2)
    assert _names(scenario.atomic_actions()) == [
        "keystone.issue_token",
        "keystone.validate_token",
        "keystone.validate_token",
        "keystone.revoke_token",
    ]
    assert keystone.count("DELETE") == 1
    assert keystone.count("GET") == 3  # 2 timed, 1 untimed check of the revoked token


def test_lifecycle_fails_when_a_revoked_token_still_validates(keystone):
    keystone.honour_revocation = False
    scenario = scenarios.Lifecycle(_context(keystone))
    with pytest.raises(scenarios.RevokedTokenStillValid) as caught:
        scenario.run()
    issued = sorted(keystone.issued)
    for token in issued:
        assert token not in str(caught.value)
    assert "gAAAAAB0..." in str(caught.value)


# -- argument validation (what `rally task validate` runs) ----------------------


def _errors(name: str, args: dict) -> list[str]:
    return rally_scenario.Scenario.validate(
        name=name, context={}, config={"args": args}, plugin_cfg=None, vtype="syntax"
    )


@pytest.mark.parametrize("name, args, argument", validation_cases.BAD_ARGUMENTS)
def test_bad_arguments_are_named(name, args, argument):
    errors = _errors(name, args)
    assert errors
    assert any(f"{argument} is" in error for error in errors), errors


@pytest.mark.parametrize("name, args", validation_cases.GOOD_ARGUMENTS)
def test_good_arguments_pass(name, args):
    assert _errors(name, args) == []
