"""A Keystone SPEC is checked before anything starts (issue 27, items 9 and 10)."""

import subprocess
import sys
from pathlib import Path

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

    def pip_that_installs_nothing(env, packages, log, fresh=False):
        subprocess.run([sys.executable, "-c", "pass"], check=True)

    monkeypatch.setattr(venv, "_pip", pip_that_installs_nothing)
    with pytest.raises(BenchError, match="installed no keystone-manage: not a Keystone"):
        venv.ensure_keystone_env(str(tree))
    assert not venv.env_path(str(tree)).exists()


def test_a_tree_is_built_without_uvs_cache_and_uwsgi_is_compiled_once(tmp_path, monkeypatch):
    """A wheel cached from another tree of the same name must never stand in for
    this one (--no-cache), and every environment takes the one uWSGI wheel."""
    monkeypatch.setenv("KEYSTONE_BENCH_CACHE", str(tmp_path / "cache"))
    commands: list[list[str]] = []

    def run_logged(cmd, log, what):
        commands.append(cmd)
        if cmd[1] == "venv":
            (Path(cmd[-1]) / "bin").mkdir(parents=True)
        if "wheel" in cmd:  # pip wheel ... -w OUT: leave what it would build
            out = Path(cmd[cmd.index("-w") + 1])
            out.mkdir(parents=True)
            tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
            (out / f"uwsgi-2.0.31-{tag}-{tag}-linux_x86_64.whl").write_text("")
        if cmd[1:3] == ["pip", "install"] and "-e" in cmd:
            env = Path(cmd[cmd.index("--python") + 1]).parent
            (env / "keystone-manage").write_text("")

    monkeypatch.setattr(venv, "_run_logged", run_logged)
    for name in ("a", "b"):
        tree = tmp_path / name / "keystone"
        tree.mkdir(parents=True)
        (tree / "setup.cfg").write_text("[metadata]\nname = keystone\n")
        venv.ensure_keystone_env(str(tree))
    trees = [c for c in commands if "-e" in c]
    assert len(trees) == 2 and all("--no-cache" in c for c in trees)
    builds = [c for c in commands if "wheel" in c]
    assert len(builds) == 1  # compiled once, for both environments
    uwsgi = [c for c in commands if c[-1].endswith(".whl")]
    assert len(uwsgi) == 2 and uwsgi[0][-1] == uwsgi[1][-1]
    assert "--no-cache" not in uwsgi[0]
