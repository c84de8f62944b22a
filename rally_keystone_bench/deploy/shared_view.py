"""What Apache's unprivileged user must reach, reachable without changing any directory's mode.

Apache will not serve as root: started by root, its daemon processes run as
another user, which must traverse the directories above the run directory,
Keystone's environment and the Python it was made from (``/root`` is 0700).
Rather than adding o+x to directories the tool did not create, Apache runs
in its own mount namespace where each such directory is a small tmpfs
(mode 0711) holding, bound back in, only the entries on the way to what
Apache needs; outside that namespace nothing changes. The bind sources are
reached through a stage directory the tool creates (``/tmp/keystone-bench-
view-<hash of the run directory>``) and removes at stop.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from rally_keystone_bench.deploy.site import Site
from rally_keystone_bench.errors import BenchError


def stage_dir(run_dir: Path) -> Path:
    """The run's stage directory (empty outside Apache's namespace)."""
    digest = hashlib.sha256(os.fsencode(Path(run_dir).resolve())).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"keystone-bench-view-{digest}"


def remove(run_dir: Path) -> None:
    shutil.rmtree(stage_dir(run_dir), ignore_errors=True)


def needed_paths(site: Site) -> list[Path]:
    """The run directory, Keystone's environment, its Python and any source it loads (.pth)."""
    paths = [site.run_dir.resolve(), site.venv.resolve()]
    python = Path(os.path.realpath(site.venv / "bin" / "python"))
    paths.append(python.parent.parent)
    for pth in site.venv.glob("lib/python*/site-packages/*.pth"):
        for line in pth.read_text(errors="replace").splitlines():
            if line.startswith("/") and Path(line).is_dir():
                paths.append(Path(line).resolve())
    return paths


def closed_dirs(paths: list[Path]) -> dict[Path, list[str]]:
    """Each directory above PATHS that others cannot traverse -> its entries on the way.

    Sorted from the top down: a closed directory below another is opened
    after the one above it.
    """
    closed: dict[Path, set[str]] = {}
    for path in paths:
        chain = [*reversed(path.parents), path]
        for parent, child in zip(chain, chain[1:], strict=False):
            if not parent.stat().st_mode & 0o001:
                closed.setdefault(parent, set()).add(child.name)
    return {d: sorted(closed[d]) for d in sorted(closed, key=lambda p: len(p.parts))}


def script(closed: dict[Path, list[str]], stage: Path) -> str:
    """The shell lines that open CLOSED inside a private mount namespace, then exec "$@"."""
    lines = ["set -e"]
    for n, (directory, entries) in enumerate(closed.items()):
        real = stage / str(n)
        lines.append(f"mkdir -p {shlex.quote(str(real))}")
        lines.append(f"mount --bind {shlex.quote(str(directory))} {shlex.quote(str(real))}")
        lines.append(
            f"mount -t tmpfs -o mode=0711,size=1m keystone-bench {shlex.quote(str(directory))}"
        )
        for entry in entries:
            inside, source = directory / entry, real / entry
            make = "mkdir" if inside.is_dir() else "touch"  # as it is outside the namespace
            lines.append(f"{make} {shlex.quote(str(inside))}")
            lines.append(f"mount --bind {shlex.quote(str(source))} {shlex.quote(str(inside))}")
    lines.append('exec "$@"')
    return "\n".join(lines)


def wrap(argv: list[str], site: Site) -> list[str]:
    """ARGV, run where the directories above what Apache needs are open to its user."""
    closed = closed_dirs(needed_paths(site))
    if not closed:
        return argv
    names = ", ".join(str(d) for d in closed)
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        said = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(
            f"--server apache as root: its user cannot reach {names}, and this machine gives "
            f"no private mount namespace to open them in (unshare: {said}): run keystone-bench "
            "as a user other than root"
        )
    stage = stage_dir(site.run_dir)
    stage.mkdir(mode=0o700, exist_ok=True)
    site.progress(f"apache: opening {names} to its user in Apache's own mount namespace only")
    return [
        "unshare", "--mount", "--propagation", "private",
        "sh", "-c", script(closed, stage), "keystone-bench-apache", *argv,
    ]  # fmt: skip
