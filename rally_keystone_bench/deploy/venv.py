"""Keystone's own virtual environments, built once per SPEC and cached.

Keystone pins its oslo libraries; Rally pins others. Each Keystone SPEC (a
pip requirement such as ``keystone==30.0.0`` or a local checkout path) gets a
virtual environment of its own under the cache directory, so the two never
clash and a second start does not install again.

uv builds them (the ``uv`` package is a dependency of this one): it resolves
and installs Keystone's hundred-odd packages in seconds where pip took a
minute or more, from one cache of downloads. uWSGI comes only as an sdist
and takes a minute of CPU to compile; uv's cache rebuilt it for every
environment here (it revalidated the sdist with PyPI at each install), so
it is built once into a wheel of our own (``wheels/`` in the cache
directory) and every environment installs that file. A tree (a local
checkout, a commit's worktree) is installed with no cache at all, so that a
wheel built from another tree of the same name is never taken for it. An
older release (``keystone==X`` with a date, deploy/releases.py) is resolved
by pip, whose --uploaded-prior-to resolution is the one that runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from rally_keystone_bench import writer
from rally_keystone_bench.deploy import gitref, releases
from rally_keystone_bench.errors import BenchError

DEFAULT_SPEC = "keystone"
COMPLETE_MARKER = ".rkb-complete"

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def cache_root() -> Path:
    """Where cached environments live: $KEYSTONE_BENCH_CACHE or ~/.cache/..."""
    root = os.environ.get("KEYSTONE_BENCH_CACHE")
    if root:
        return Path(root)
    return Path.home() / ".cache" / "rally-keystone-bench"


def is_local_checkout(spec: str) -> bool:
    if gitref.is_spec(spec):
        return False
    return os.path.sep in spec or spec.startswith(".") or Path(spec).is_dir()


def check_spec(spec: str) -> None:
    """BenchError when SPEC is neither a pip requirement nor a Keystone checkout."""
    if not spec.strip():
        raise BenchError(
            "the Keystone SPEC is empty: give a pip requirement (keystone==30.0.0) or a "
            "checkout's path"
        )
    if not is_local_checkout(spec):
        if not gitref.is_spec(spec):
            _check_requirement(spec)
        return
    path = Path(spec)
    if not path.exists():
        raise BenchError(f"Keystone checkout {spec} does not exist")
    if not path.is_dir():
        raise BenchError(f"Keystone checkout {spec} is a file, not a directory")
    if not (path / "setup.cfg").exists() and not (path / "pyproject.toml").exists():
        raise BenchError(f"{spec} is not a Keystone checkout (no setup.cfg or pyproject.toml)")


def _check_requirement(spec: str) -> None:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(spec)
    except InvalidRequirement as exc:
        reason = str(exc).splitlines()[0]
        raise BenchError(
            f"Keystone SPEC {spec!r} is neither a pip requirement (keystone==30.0.0) nor a "
            f"checkout's path: {reason}"
        ) from None


def env_slug(spec: str) -> str:
    """A directory name that identifies SPEC: readable, and unique by hash."""
    if gitref.is_spec(spec):  # one environment per commit, wherever the checkout is
        sha = gitref.parse_spec(spec)[1]
        return f"keystone-git-{sha[:12]}-{hashlib.sha256(sha.encode()).hexdigest()[:10]}"
    key = str(Path(spec).resolve()) if is_local_checkout(spec) else spec.strip()
    dated = None if is_local_checkout(spec) else releases.cutoff(spec, lookup=False)
    if dated:  # built with the dependencies of its time: never the same env as before
        key += f" uploaded-prior-to {dated} {' '.join(releases.caps(spec))}".rstrip()
    readable = re.sub(r"[^A-Za-z0-9_.=-]+", "_", Path(key).name if is_local_checkout(spec) else key)
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return f"{readable[:40]}-{digest}"


def env_path(spec: str) -> Path:
    return cache_root() / "venvs" / env_slug(spec)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock so two starts never build one environment at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with writer.open_stream(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def uv_binary() -> str:
    """The uv executable that came with this package (the ``uv`` distribution)."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
        raise BenchError("uv is not installed: pip install uv") from None


def _uv_env() -> dict[str, str]:
    """uv's environment: the CA bundle pip was told of (a proxy's) is uv's too."""
    env = dict(os.environ)
    cert = env.get("PIP_CERT") or env.get("REQUESTS_CA_BUNDLE")
    if cert and not env.get("SSL_CERT_FILE"):
        env["SSL_CERT_FILE"] = cert
    return env


def _make_venv(venv: Path, log: Path) -> None:
    _run_logged([uv_binary(), "venv", "--no-config", "--python", sys.executable, str(venv)], log,
                what=f"create a virtual environment in {venv}")  # fmt: skip


def _pip(venv: Path, args: list[str], log: Path, *, fresh: bool = False) -> None:
    """uv pip install ARGS into VENV; FRESH: with no cache (a tree's own build)."""
    cmd = [uv_binary(), "pip", "install", "--no-config", "--python", str(venv / "bin" / "python")]
    if fresh:
        cmd.append("--no-cache")
    _run_logged([*cmd, *args], log, what=f"install {' '.join(args)}")


def _uwsgi_wheel(log: Path) -> str:
    """Our uWSGI wheel for this Python, compiled on first use and kept."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    wheels = cache_root() / "wheels"
    with _locked(wheels / ".uwsgi.lock"):
        built = sorted(wheels.glob(f"uwsgi-*-{tag}-*.whl"))
        if built:
            return str(built[-1])
        work = wheels / f".build-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        try:
            env = work / "env"
            _run_logged([uv_binary(), "venv", "--no-config", "--seed", "--python", sys.executable,
                         str(env)], log, what="create uWSGI's build environment")  # fmt: skip
            _run_logged([str(env / "bin" / "python"), "-m", "pip", "wheel", "--no-deps",
                         "--no-cache-dir", "--disable-pip-version-check", "uwsgi", "-w",
                         str(work / "out")], log, what="build uWSGI")  # fmt: skip
            (wheel,) = (work / "out").glob(f"uwsgi-*-{tag}-*.whl")
            writer.move(wheel, wheels / wheel.name)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return str(wheels / wheel.name)


def _run_logged(cmd: list[str], log: Path, what: str) -> None:
    with writer.open_stream(log, "a") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=_uv_env())
    if proc.returncode != 0:
        raise BenchError(f"could not {what}: {_pip_reason(log)} (log: {log})")


def _pip_reason(log: Path) -> str:
    """The most telling line of a failed install: uv's cause, else its error."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    for prefix in ("cause:", "error:", "ERROR:"):
        for ln in reversed(lines):
            if ln.startswith(prefix):
                return ln[len(prefix) :].strip()
    return lines[-1] if lines else "no output"


def ensure_keystone_env(
    spec: str | None = None, extras: tuple[str, ...] = (), progress: Progress = _quiet
) -> Path:
    """Return a virtual environment with Keystone SPEC and uWSGI, building it once.

    ``extras`` are further packages the deployment needs in Keystone's
    environment (a database driver, gunicorn, mod_wsgi, a memcached client);
    they are installed when missing.
    """
    spec = spec or DEFAULT_SPEC
    check_spec(spec)
    venv = env_path(spec)
    lock = venv.parent / f"{venv.name}.lock"  # not with_suffix: the name has dots in it
    with _locked(lock):
        log = venv.parent / f"{venv.name}.install.log"
        if not (venv / COMPLETE_MARKER).exists():
            if venv.exists():
                shutil.rmtree(venv)
            progress(f"building Keystone environment for {spec} in {venv} (once per SPEC)")
            writer.write_text(log, "")
            installed = False
            try:
                _make_venv(venv, log)
                _install(venv, spec, log, progress)
                installed = True
                _check_keystone(venv, spec)  # before uWSGI: a wrong tree fails fast
                _pip(venv, [_uwsgi_wheel(log)], log)  # our server, not Keystone's: today's
            except BenchError as exc:
                # Never cached as complete: the next run builds it again.
                shutil.rmtree(venv, ignore_errors=True)
                if installed:
                    raise
                # A SPEC that does not install leaves nothing: the error says why.
                log.unlink(missing_ok=True)
                lock.unlink(missing_ok=True)
                raise BenchError(str(exc).replace(f" (log: {log})", "")) from None
            except BaseException:
                shutil.rmtree(venv, ignore_errors=True)
                raise
            writer.write_text(venv / COMPLETE_MARKER, spec + "\n")
        missing = [pkg for pkg in extras if not _has_distribution(venv, pkg)]
        if missing:
            progress(f"installing {', '.join(missing)} into {venv}")
            _pip(venv, missing, log)
    return venv


def _install(venv: Path, spec: str, log: Path, progress: Progress) -> None:
    """Keystone SPEC (uWSGI comes after): a commit from a worktree; an older release
    with the dependencies of its day."""
    if gitref.is_spec(spec):
        # Not editable: the worktree is removed, the environment stays cached.
        with gitref.worktree(spec) as tree:
            _pip(venv, [str(tree)], log, fresh=True)
        return
    if is_local_checkout(spec):
        _pip(venv, ["-e", str(Path(spec).resolve())], log, fresh=True)
        return
    dated = releases.cutoff(spec)
    if dated is None:
        _pip(venv, [spec], log)
        return
    progress(f"{spec}: with the packages published before {dated}")
    _pip_dated(venv, spec, dated, log)
    _add_wsgi_module(venv)


def _pip_dated(venv: Path, spec: str, dated: str, log: Path) -> None:
    """pip, not uv, for an older release: uv's --exclude-newer resolved keystone
    29.1.0 to pyOpenSSL 22.0.0 beside cryptography 50.0.1, which does not import
    (eventlet imports OpenSSL); pip's --uploaded-prior-to resolution runs."""
    python = str(venv / "bin" / "python")
    _run_logged([uv_binary(), "pip", "install", "--no-config", "--python", python, "pip",
                 "setuptools<81"], log, what="put pip into the environment")  # fmt: skip
    pip = [python, "-m", "pip", "install", "--disable-pip-version-check"]
    _run_logged([*pip, "-U", releases.PIP_WITH_CUTOFF], log, what="upgrade pip")
    # Sdists of that day build with pbr, which imports pkg_resources: today's
    # setuptools has none, so their build environments get an older one.
    build = venv / "rkb-build-constraints.txt"
    writer.write_text(build, releases.BUILD_CONSTRAINTS)
    args = [*releases.pypi_only(os.environ), "--uploaded-prior-to", dated]
    args += ["--build-constraint", str(build)]
    if releases.caps(spec):
        pins = venv / "rkb-constraints.txt"
        writer.write_text(pins, "".join(f"{c}\n" for c in releases.caps(spec)))
        args += ["--constraint", str(pins)]
    _run_logged([*pip, *args, spec], log, what=f"install {spec}")


def _check_keystone(venv: Path, spec: str) -> None:
    if not (venv / "bin" / "keystone-manage").exists():
        # uv installed something: a tree that is not Keystone's.
        raise BenchError(f"{spec} installed no keystone-manage: not a Keystone")


# keystone.wsgi.api, as newer Keystones ship it (28.0.0 has it, 24.0.0 not); older
# releases had only the keystone-wsgi-public script, whose body this is.
WSGI_API = """\"\"\"WSGI entry point, added by rally-keystone-bench.\"\"\"

from keystone.server import wsgi

application = wsgi.initialize_public_application()
"""


def _add_wsgi_module(venv: Path) -> None:
    """Give an older Keystone the keystone.wsgi.api module our servers load."""
    found = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import keystone, os; print(os.path.dirname(keystone.__file__))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    package = Path(found.stdout.strip()) / "wsgi"
    if (package / "api.py").exists():
        return
    package.mkdir(exist_ok=True)
    writer.touch(package / "__init__.py")
    writer.write_text(package / "api.py", WSGI_API)


def _has_distribution(venv: Path, requirement: str) -> bool:
    name = re.split(r"[<>=!~\[ ]", requirement, maxsplit=1)[0]
    probe = f"import importlib.metadata as m; m.distribution({name!r})"
    return (
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", probe],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ).returncode
        == 0
    )


def keystone_version(venv: Path) -> str:
    """The installed Keystone version in VENV."""
    out = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('keystone'))",
        ],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() or "unknown"
