"""A Keystone SPEC is checked before anything starts (issue 27, items 9 and 10)."""

import subprocess
import sys

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.deploy import venv
from rally_keystone_bench.errors import BenchError


def test_gate_with_a_missing_candidate_says_so_before_the_baseline_starts(tmp_path, capsys):
    argv = ["gate", "--baseline", "keystone", "--candidate", str(tmp_path / "nope")]
    assert cli.main(argv + ["--reports-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"keystone-bench: Keystone checkout {tmp_path / 'nope'} does not exist"]


def test_load_with_a_missing_keystone_is_one_line_and_leaves_no_file(tmp_path, capsys):
    argv = ["load", "--scenario", "authenticate", "--target", "local"]
    argv += ["--keystone", str(tmp_path / "nope"), "--reports-dir", str(tmp_path / "r")]
    assert cli.main(argv) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def test_a_tree_that_installs_no_keystone_is_never_cached_complete(tmp_path, monkeypatch):
    monkeypatch.setenv("KEYSTONE_BENCH_CACHE", str(tmp_path / "cache"))
    tree = tmp_path / "notkeystone"
    tree.mkdir()
    (tree / "setup.cfg").write_text("[metadata]\nname = notkeystone\n")

    def pip_that_installs_nothing(env, packages, log):
        subprocess.run([sys.executable, "-c", "pass"], check=True)

    monkeypatch.setattr(venv, "_pip", pip_that_installs_nothing)
    with pytest.raises(BenchError, match="installed no keystone-manage: not a Keystone"):
        venv.ensure_keystone_env(str(tree))
    assert not venv.env_path(str(tree)).exists()
