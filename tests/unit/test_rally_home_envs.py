"""RallyHome.create_env replaces an env of the same name, in a new home or an old one.

A home whose database it made itself knows its envs and skips asking
Rally (``rally env show``: a process and its imports) before creating
one; these tests check that the skipping never leaves two envs of one
name, through the real ``rally`` CLI (``env create`` does not contact the
cloud, so no Keystone is needed).
"""

from __future__ import annotations

from rally_keystone_bench.driver.rally import RallyHome, keystone_spec

SPEC = keystone_spec(
    {
        "auth_url": "http://127.0.0.1:9/v3",
        "username": "admin",
        "password": "not-a-real-one",
        "project_name": "admin",
        "user_domain_name": "Default",
        "project_domain_name": "Default",
    }
)


def test_the_same_name_twice_in_a_new_home_replaces_the_first(tmp_path):
    """Rally refuses a second env of one name: a wrong skip would fail the second create."""
    home = RallyHome(tmp_path / "rally")
    first = home.create_env("ks", SPEC)
    second = home.create_env("ks", SPEC)
    assert first != second
    listed = home.rally("env", "list").stdout
    assert second in listed and first not in listed
    assert listed.split().count("ks") == 1
