"""--set SECTION.OPTION=VALUE: parsing, the registry check, keystone.conf rendering.

The registry is a recorded part of Keystone 30.0.0's (registry_of() on its
environment, trimmed to a few sections), so no Keystone is needed here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.deploy import conf_options, jws
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verbs import gate

REGISTRY = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "keystone-30.0.0-conf-registry.json").read_text()
)


@pytest.mark.parametrize(
    "setting",
    [
        "token.provider=jws",
        "token.expiration=7200",
        "token.revoke_by_id=False",
        "identity.password_hash_algorithm=scrypt",
        "cache.memcache_servers=127.0.0.1:1,127.0.0.1:2",
        "DEFAULT.debug=yes",
        "jwt_tokens.jws_algorithm=ES384",
        "fernet_tokens.max_active_keys=100",
    ],
)
def test_a_setting_keystone_knows_passes(setting: str) -> None:
    conf_options.check(conf_options.normalise([setting], "--set"), REGISTRY)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("token.bogus=1", "--set token.bogus: [token] has no option 'bogus'"),
        ("tokn.provider=jws", "unknown section [tokn] (did you mean token?)"),
        ("token.provider=pki", "must be one of fernet, jws"),
        ("token.expiration=-1", "must be at least 0"),
        ("token.expiration=soon", "must be an integer"),
        ("DEFAULT.debug=maybe", "must be true or false"),
        ("identity.password_hash_algorithm=md5", "must be one of bcrypt, bcrypt_sha256"),
        ("jwt_tokens.jws_algorithm=RS256", "must be one of ES256, ES384, ES512, EdDSA"),
        ("database.connection=sqlite://", "the deployment sets it; use --db and --db-url"),
        ("fernet_tokens.max_active_keys=0", "must be at least 1"),
    ],
)
def test_an_unknown_option_or_a_bad_value_is_named(setting: str, message: str) -> None:
    with pytest.raises(BenchError, match=None) as raised:
        conf_options.check(conf_options.normalise([setting], "--set"), REGISTRY)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("text", ["token", "token.provider", ".x=1", "token.=1", "=1"])
def test_a_setting_without_section_option_and_value_is_refused(text: str) -> None:
    with pytest.raises(BenchError, match="is not SECTION.OPTION=VALUE"):
        conf_options.parse(text)


def test_a_deployment_file_gives_conf_as_sections_or_dotted_keys() -> None:
    dep = Deployment.from_mapping(
        {"conf": {"token": {"provider": "jws", "caching": False}, "cache.enabled": True}}, "f"
    )
    assert dep.conf == {"token.provider": "jws", "token.caching": "false", "cache.enabled": "true"}
    with pytest.raises(BenchError, match="a value must be one line"):
        Deployment.from_mapping({"conf": {"token.provider": "jws\n[x]"}}, "f")


def test_settings_replace_what_is_rendered_and_add_what_is_not() -> None:
    rendered = "[DEFAULT]\nlog_file = k.log\n\n[token]\nprovider = fernet\n\n[cache]\nenabled = 1\n"
    text = conf_options.apply(
        rendered, {"token.provider": "jws", "token.expiration": "600", "identity.x": "1"}
    )
    assert "provider = fernet" not in text
    assert text.count("[token]") == 1
    token = text.split("[token]")[1].split("[cache]")[0]
    assert "provider = jws" in token and "expiration = 600" in token
    assert text.rstrip().endswith("[identity]\nx = 1")


def test_the_deployment_line_names_each_setting_and_hides_secrets() -> None:
    dep = Deployment(conf={"token.provider": "jws", "cache.memcache_password": "hunter2"})
    line = dep.describe()
    assert "token.provider=jws" in line
    assert "cache.memcache_password=***" in line and "hunter2" not in line


def test_jws_needs_its_key_repositories(tmp_path: Path) -> None:
    assert jws.wanted({"token.provider": "JWS"}) and not jws.wanted({})
    repos = jws.repositories(tmp_path)
    assert repos["jwt_tokens.jws_private_key_repository"].startswith(str(tmp_path))


def test_set_is_repeatable_on_every_deployment_verb() -> None:
    parser = cli.build_parser()
    for verb in (["keystone", "up"], ["run"], ["capacity", "--scenario", "validate"], ["load"]):
        args = parser.parse_args([*verb, "--set", "token.provider=jws", "--set", "a.b=c"])
        assert args.conf == ["token.provider=jws", "a.b=c"], verb


def test_the_gate_takes_a_setting_for_both_sides_and_one_for_one_side() -> None:
    shared = ["token.expiration=600"]
    base = gate.side_deployment("keystone==30.0.0", [], "--baseline-option", None, shared)
    cand = gate.side_deployment(
        "keystone==30.0.0", ["token.provider=jws"], "--candidate-option", None, shared
    )
    assert base.conf == {"token.expiration": "600"}
    assert cand.conf == {"token.expiration": "600", "token.provider": "jws"}
