"""A Keystone from a commit of a git checkout: the gate's baseline from the change's history.

``gate --candidate ../keystone`` with no ``--baseline`` measures the change
against its parent commit (``HEAD~1``), the way OpenStack's own jobs compare a
change with its target branch. The commit is checked out into a temporary
``git worktree``, installed (not editable) into an environment cached per
commit like a release's, and the worktree is removed again.

A commit's SPEC is ``git-commit:REPO@SHA`` (the checkout's absolute path and the
full commit hash).
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
from collections.abc import Iterator
from pathlib import Path

from rally_keystone_bench import writer
from rally_keystone_bench.errors import BenchError

PREFIX = "git-commit:"
DEFAULT_REF = "HEAD~1"


@dataclasses.dataclass(frozen=True)
class Commit:
    """One commit of a checkout: what the gate's reports name."""

    repo: Path
    sha: str
    subject: str

    @property
    def spec(self) -> str:
        return f"{PREFIX}{self.repo}@{self.sha}"

    def describe(self) -> str:
        return f"{self.sha[:12]} {self.subject!r}"


def is_spec(spec: str) -> bool:
    return spec.startswith(PREFIX)


def parse_spec(spec: str) -> tuple[Path, str]:
    """REPO and SHA of a ``git-commit:REPO@SHA`` SPEC."""
    repo, sep, sha = spec[len(PREFIX) :].rpartition("@")
    if not sep or not repo or not sha:
        raise BenchError(f"{spec!r} is not git-commit:REPO@COMMIT")
    return Path(repo), sha


def label(spec: str) -> str:
    """A short name for SPEC in a deployment line: ``keystone@1a2b3c4d5e6f`` for a commit."""
    if is_spec(spec):
        return f"keystone@{parse_spec(spec)[1][:12]}"
    return spec


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )


def toplevel(path: str | Path) -> Path:
    """The top of the git checkout at PATH; BenchError when PATH is none."""
    where = Path(path)
    if not where.exists():
        raise BenchError(f"{path} does not exist")
    if not where.is_dir():
        raise BenchError(f"{path} is not a directory, so not a git checkout")
    proc = _git(where, "rev-parse", "--show-toplevel")
    if proc.returncode != 0:
        raise BenchError(f"{path} is not a git checkout: it has no commits to compare with")
    return Path(proc.stdout.strip()).resolve()


def resolve(repo: Path, ref: str) -> Commit:
    """REF of REPO as a Commit; BenchError naming REF when git does not know it."""
    if not ref or ref.startswith("-"):
        raise BenchError(f"{ref!r} is not a git ref")
    proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if proc.returncode != 0:
        raise BenchError(f"{repo} has no commit {ref!r}")
    sha = proc.stdout.strip()
    subject = _git(repo, "log", "-1", "--format=%s", sha).stdout.strip()
    return Commit(repo, sha, subject)


def merge_base(repo: Path, branch: str) -> Commit:
    """Where HEAD of REPO left BRANCH: the commit a change proposed to BRANCH builds on."""
    target = resolve(repo, branch)
    proc = _git(repo, "merge-base", "HEAD", target.sha)
    if proc.returncode != 0:
        raise BenchError(f"{repo}: HEAD and {branch!r} have no common commit")
    return resolve(repo, proc.stdout.strip())


def uncommitted(repo: Path) -> bool:
    """True when tracked files of REPO differ from HEAD (untracked files do not count)."""
    return bool(_git(repo, "status", "--porcelain", "--untracked-files=no").stdout.strip())


@contextlib.contextmanager
def worktree(spec: str) -> Iterator[Path]:
    """The commit of SPEC checked out in a temporary worktree, removed on exit."""
    repo, sha = parse_spec(spec)
    with writer.temporary_directory("rkb-baseline-") as parent:
        tree = Path(parent) / "keystone"
        proc = _git(repo, "worktree", "add", "--detach", str(tree), sha)
        if proc.returncode != 0:
            reason = (proc.stderr.strip().splitlines() or ["git worktree add failed"])[-1]
            raise BenchError(f"cannot check out {sha[:12]} of {repo}: {reason}")
        try:
            yield tree
        finally:
            _git(repo, "worktree", "remove", "--force", str(tree))
            _git(repo, "worktree", "prune")
