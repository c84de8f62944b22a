"""The gate's sized pass: what the seeding plan holds, and that it is fixed."""

from __future__ import annotations

import json

import pytest

from rally_keystone_bench.deploy import seed_plan
from rally_keystone_bench.deploy.seed_plan import DEFAULT, EVENT_KINDS, SeedPlan


def test_default_plan_has_every_event_kind_keystone_writes() -> None:
    assert set(DEFAULT.events) == set(EVENT_KINDS)
    assert all(n > 0 for n in DEFAULT.events.values())


def test_default_plan_is_a_busy_clouds_hour_of_revocations() -> None:
    # Keystone keeps an event 90 minutes; at one a second that is 5,400.
    assert seed_plan.busy_cloud_events() == 5400
    assert DEFAULT.revocations >= 4000  # "several thousand at least"
    # a release that writes a chain event per revoked token writes more
    assert DEFAULT.total_events(per_token=2) == DEFAULT.revocations + DEFAULT.events["token"]


def test_default_catalog_and_assignments_are_cloud_sized() -> None:
    assert DEFAULT.services >= 20 and DEFAULT.regions == 2 and DEFAULT.interfaces == 3
    assert DEFAULT.endpoints == DEFAULT.services * 6
    assert DEFAULT.groups >= 3 and DEFAULT.projects >= 40 and DEFAULT.inherited_domain_role


def test_the_plan_is_the_same_json_every_time_with_its_seed() -> None:
    one, two = SeedPlan().to_json(), SeedPlan().to_json()
    assert one == two
    assert json.loads(one)["seed"] == DEFAULT.seed
    assert seed_plan.from_mapping(json.loads(one)) == DEFAULT


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"events": {"grant": 5}}, "unknown revocation event kind(s): grant"),
        ({"services": -1}, "negative size(s): services"),
        ({"interfaces": 4}, "interfaces must be 1 to 3"),
    ],
)
def test_a_bad_plan_says_what_is_wrong(bad: dict, words: str) -> None:
    with pytest.raises(ValueError) as err:
        SeedPlan(**bad)
    assert words in str(err.value)


def test_description_names_sizes() -> None:
    text = DEFAULT.describe()
    assert "4,400 revocations" in text and "180 endpoints" in text and "5 groups" in text
