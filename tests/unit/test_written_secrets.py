"""No JSON the tool writes holds a password readable by others (issue 27, item 4)."""

import json
import stat

from rally_keystone_bench import cli
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.report.redact import redact
from rally_keystone_bench.verbs import load

SECRET = "S3cretPw"
DB_URL = f"postgresql://postgres:{SECRET}@127.0.0.1:5432"


def test_load_json_masks_the_database_password(tmp_path, monkeypatch):
    monkeypatch.setattr(load, "run_locust", lambda *a: 0)  # no load: only what is written first
    argv = ["load", "--scenario", "authenticate", "--target", "local", "--db", "postgresql"]
    argv += ["--db-url", DB_URL, "--reports-dir", str(tmp_path)]
    assert cli.main(argv) == 0
    (written,) = tmp_path.glob("*/load.json")
    text = written.read_text()
    assert SECRET not in text
    assert json.loads(text)["deployment"]["db_url"] == "postgresql://postgres:***@127.0.0.1:5432"


def test_state_json_is_its_owners_only(tmp_path):
    ks = LocalKeystone(Deployment(db="postgresql", db_url=DB_URL), tmp_path)
    ks._write_state()
    assert stat.S_IMODE(ks.state_path.stat().st_mode) == 0o600


def test_redact_masks_urls_and_password_fields():
    found = redact({"a": [DB_URL], "admin_password": SECRET, "password_hash_rounds": 4})
    assert SECRET not in json.dumps(found)
    assert found["password_hash_rounds"] == 4
