"""Which Keystone a deployment runs: a release as installed, or a checkout's commit.

What the results store records of the Keystone under test: the verbs ask
here and hand history/ the answer as a value (history.records.Keystone).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from rally_keystone_bench.deploy import gitref, venv


def _git(repo: Path, *args: str) -> str | None:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None


def describe(spec: str) -> dict[str, str | None]:
    """SPEC's commit, ``git describe`` and repository (a checkout, or a git-commit: spec);
    a release's installed version as its describe."""
    if gitref.is_spec(spec):
        repo, sha = gitref.parse_spec(spec)
    elif venv.is_local_checkout(spec) and Path(spec).is_dir():
        repo, sha = Path(spec).resolve(), "HEAD"
    else:
        return {"commit": None, "describe": installed_release(spec), "repo": None}
    commit = _git(repo, "rev-parse", "--verify", "--quiet", f"{sha}^{{commit}}")
    if commit is None:
        return {"commit": None, "describe": None, "repo": str(repo)}
    described = _git(repo, "describe", "--tags", "--always", commit)
    return {"commit": commit, "describe": described, "repo": str(repo)}


def deployment_line(describe: str, spec: str) -> str:
    """A deployment line without the Keystone's name: the Keystone is recorded apart, and
    a new commit of master must stay in the same series."""
    return describe.removeprefix(gitref.label(spec) + " ")


def installed_release(spec: str) -> str | None:
    """``keystone X.Y.Z`` as installed for a release SPEC (``keystone`` is the newest)."""
    env = venv.env_path(spec)
    if not (env / "bin" / "python").is_file():
        return None
    version = venv.keystone_version(env)
    return None if version == "unknown" else f"keystone {version}"
