"""The gate's baseline from the candidate's own history: refs resolved, bad ones refused
(exit 2) before anything starts, a commit's environment cached per commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.deploy import gitref, venv
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.report import svg
from rally_keystone_bench.verbs import gate, options


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout of three commits on main: release, a slow change, and a branch point."""
    r = tmp_path / "keystone"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    for n, subject in enumerate(["Release 30.0.0", "Sleep 150 ms in issue_token"]):
        (r / "provider.py").write_text(f"# version {n}\n")
        git(r, "add", "provider.py")
        git(r, "commit", "-q", "-m", subject)
    return r


def args_for(*argv: str) -> gate.GateArgs:
    """gate's own options from ARGV, as its door reads them."""
    return options.read(gate.GateArgs, cli.build_parser().parse_args(["gate", *argv]))


def test_default_baseline_is_the_candidates_parent_and_reports_name_both(repo):
    spec, names = gate.resolve_baseline(args_for("--candidate", str(repo)))
    parent = git(repo, "rev-parse", "HEAD~1")
    assert spec == f"git-commit:{repo.resolve()}@{parent}"
    assert names["baseline"] == f"commit {parent[:12]} 'Release 30.0.0'"
    head = git(repo, "rev-parse", "HEAD")
    assert names["candidate"] == f"commit {head[:12]} 'Sleep 150 ms in issue_token'"


def test_git_ref_forms_agree(repo):
    by_ref = gate.resolve_baseline(args_for("--candidate", str(repo), "--baseline-ref", "HEAD~1"))
    by_spec = gate.resolve_baseline(args_for("--candidate", str(repo), "--baseline", "git:HEAD~1"))
    assert by_ref == by_spec


def test_merge_base_with_a_named_branch(repo):
    base = git(repo, "rev-parse", "HEAD~1")
    git(repo, "checkout", "-q", "-b", "change", base)
    (repo / "other.py").write_text("x = 1\n")
    git(repo, "add", "other.py")
    git(repo, "commit", "-q", "-m", "A change proposed to main")
    spec, _ = gate.resolve_baseline(args_for("--candidate", str(repo), "--baseline-branch", "main"))
    assert spec.endswith("@" + base)


def test_a_release_baseline_is_kept_as_given(repo):
    assert gate.resolve_baseline(
        args_for("--candidate", str(repo), "--baseline", "keystone==30.0.0")
    ) == ("keystone==30.0.0", {})


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--baseline-ref", "no-such-ref"], "has no commit 'no-such-ref'"),
        (["--baseline-ref=-oops"], "is not a git ref"),
        (["--baseline-branch", "nowhere"], "has no commit 'nowhere'"),
    ],
)
def test_unknown_refs_are_refused(repo, argv, message):
    with pytest.raises(BenchError, match=message):
        gate.resolve_baseline(args_for("--candidate", str(repo), *argv))


def test_uncommitted_changes_under_the_default_ref_are_refused_and_say_what(repo):
    (repo / "provider.py").write_text("# edited\n")
    with pytest.raises(BenchError, match="uncommitted changes.*--baseline-ref HEAD"):
        gate.resolve_baseline(args_for("--candidate", str(repo)))
    # Named explicitly, the working tree is measured, and the report says so.
    _, names = gate.resolve_baseline(args_for("--candidate", str(repo), "--baseline-ref", "HEAD"))
    assert names["candidate"].endswith("+ uncommitted changes")


def test_candidates_without_history_are_refused(tmp_path, repo):
    plain = tmp_path / "sdist"
    plain.mkdir()
    for cand, message in [
        (str(tmp_path / "missing"), "does not exist"),
        ("keystone==30.0.0", "is not a checkout, so it has no parent commit"),
        (str(plain), "is not a git checkout"),
    ]:
        with pytest.raises(BenchError, match=message):
            gate.resolve_baseline(args_for("--candidate", cand))
    sub = repo / "keystone"
    sub.mkdir()
    with pytest.raises(BenchError, match="not its top"):
        gate.resolve_baseline(args_for("--candidate", str(sub)))


def test_bad_ref_exits_2_in_one_line_before_anything_starts(repo, capsys, tmp_path):
    rc = cli.main(["gate", "--candidate", str(repo), "--baseline-ref", "nope",
                   "--reports-dir", str(tmp_path / "reports")])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "nope" in err
    assert not (tmp_path / "reports").exists()


def test_commit_environments_are_cached_per_commit_and_labelled_short(repo):
    spec, _ = gate.resolve_baseline(args_for("--candidate", str(repo)))
    sha = spec.rsplit("@", 1)[1]
    assert not venv.is_local_checkout(spec)
    assert venv.env_slug(spec).startswith(f"keystone-git-{sha[:12]}-")
    moved = f"git-commit:/elsewhere/keystone@{sha}"
    assert venv.env_slug(moved) == venv.env_slug(spec)  # the commit, not the path
    assert gitref.label(spec) == f"keystone@{sha[:12]}"


def test_worktree_holds_the_commit_and_is_removed(repo):
    spec, _ = gate.resolve_baseline(args_for("--candidate", str(repo)))
    with gitref.worktree(spec) as tree:
        assert (tree / "provider.py").read_text() == "# version 0\n"
    assert not tree.exists()
    assert git(repo, "worktree", "list").count("\n") == 0  # only the main tree


def test_block_ratio_chart_marks_set_aside_blocks_and_the_limit():
    chart = svg.block_ratios("t", [(0.0, 1.02, False), (2.0, 1.5, True), (4.0, 0.98, False)],
                             1.1, 1.0)  # fmt: skip
    assert chart.count('class="clean"') == 2 and chart.count('class="aside"') == 1
    assert 'class="limit"' in chart and "regression above 1.1" in chart
