"""py-spy samples of Keystone's server processes during a load: collapsed stacks.

py-spy attaches by pid (ptrace) and reads the interpreter's stacks from
outside: nothing changes inside Keystone. ``--subprocesses`` follows the
uWSGI master to its workers; ``--idle`` keeps the samples of a thread that
waits (a ``time.sleep``, a lock, a socket), which is where a request's time
may go too; ``--nonblocking`` never pauses Keystone to read it.

    with profiled([pid], out_dir / "profile-baseline.txt", say) as prof:
        ... the load ...
    prof.path  # collapsed stacks ("frame;frame;... count"), xz-compressed, or None
    read_lines(prof.path)  # what any reader takes

Where py-spy is missing or cannot attach (no ptrace permission), it says so
once and the run goes on without profiles.

py-spy's stacks carry no time stamps. Given ``slice_s``, py-spy is started
again every ``slice_s`` seconds and each slice's stacks are kept with the
epoch seconds it covered (``STEM-profile-slices.txt.xz``, ``read_slices``):
a reader splits them by time, each workload its own flame graph. A restart
leaves py-spy's attach time unsampled (about 0.1 s); ``spans`` says which
seconds were sampled, so requests are counted over the same seconds.

Without ``--native`` a sample's innermost frame is the Python line that
made a call into C (``time.sleep(0.15)``, ``bcrypt.hashpw(...)``), and
``line_reader`` reads that line's text from the side's Keystone
environment: that names the call. ``--native`` is not used: py-spy 0.4.3
refuses it with ``--nonblocking`` ("Can't get native stack traces with the
--nonblocking option"), so each sample would pause Keystone's worker, and
it names the C function (``time_sleep (libpython3.11.so.1.0)``), not the
call as Keystone's code spells it.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import functools
import lzma
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from rally_keystone_bench import writer

RATE = 100  # samples per second and process
SLICE_S = 2.0  # seconds between restarts of py-spy when its samples are split by time
# Up to here a frame's path says only where Python was installed: site-packages'
# (a venv's, the cache's) and the standard library's prefixes are dropped.
_PREFIX = re.compile(r"\((?:[^()]*/)?(?:site-packages|dist-packages|lib/python3\.\d+)/")
_warned: set[str] = set()


def executable() -> str | None:
    """py-spy beside our Python, or on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def _say_once(say: Callable[[str], None], text: str) -> None:
    if text not in _warned:
        _warned.add(text)
        say(text)


class Profile:
    """One py-spy process per server pid; their collapsed stacks merged into PATH.

    SLICE_S: restart py-spy every SLICE_S seconds and keep each slice's stacks
    with its time (``slices_path``); None keeps one recording.
    """

    def __init__(
        self, pids: Sequence[int], path: Path, say: Callable[[str], None],
        slice_s: float | None = None,
    ) -> None:  # fmt: skip
        self.pids = list(pids)
        self.target = path
        self.say = say
        self.slice_s = slice_s
        self.path: Path | None = None
        self.slices_path: Path | None = None
        self.spans: list[tuple[float, float]] = []  # epoch seconds py-spy was sampling
        self.cpu_seconds = 0.0  # py-spy's own CPU over the task: what it took from the machine
        self.wall_seconds = 0.0
        self._started = 0.0
        self._since = 0.0  # epoch start of the current slice
        self._procs: list[tuple[subprocess.Popen, Path, Path]] = []
        self._ids: dict[str, int] = {}  # stack text -> its number in the slices file
        self._slices: list[tuple[float, float, collections.Counter[int]]] = []
        self._merged: collections.Counter[int] = collections.Counter()
        self._halt = threading.Event()
        self._rotator: threading.Thread | None = None

    def _spawn(self, spy: str, n: int) -> list[tuple[subprocess.Popen, Path, Path]]:
        procs = []
        for pid in self.pids:
            out = self.target.with_name(f"{self.target.stem}-{pid}-{n}.raw")
            log = self.target.with_name(f"{self.target.stem}-{pid}-{n}.log")
            argv = [
                spy, "record", "--pid", str(pid), "--subprocesses", "--idle", "--nonblocking",
                "--rate", str(RATE), "--format", "raw", "--output", str(out),
            ]  # fmt: skip
            with writer.open_stream(log, "w") as err:
                proc = subprocess.Popen(argv, stdout=err, stderr=subprocess.STDOUT)
            procs.append((proc, out, log))
        self._since = time.time()
        return procs

    def start(self) -> None:
        if not self.pids:
            return
        spy = executable()
        if spy is None:
            _say_once(self.say, "py-spy is not installed: no profiles (pip install py-spy)")
            return
        self._procs = self._spawn(spy, 0)
        self._started = time.monotonic()
        time.sleep(1.0)
        for proc, _, log in self._procs:
            if proc.poll() is not None:
                reason = log.read_text(errors="replace").strip().splitlines()[-1:] or ["?"]
                _say_once(self.say, f"py-spy could not attach: {reason[0]}; no profiles")
                return
        if self.slice_s:
            self._rotator = threading.Thread(target=self._rotate, args=(spy,), daemon=True)
            self._rotator.start()

    def _rotate(self, spy: str) -> None:
        """Every slice_s seconds: the next py-spy started, then the last one stopped."""
        n = 0
        while not self._halt.wait(self.slice_s):
            n += 1
            old, since = self._procs, self._since
            self._procs = self._spawn(spy, n)
            self._finish(old, since, self._since)

    def _finish(self, procs: list, since: float, until: float) -> None:
        """Stop PROCS (SIGINT: py-spy writes its file); keep their stacks as one slice."""
        self.cpu_seconds += sum(_cpu_seconds(proc.pid) for proc, _, _ in procs)
        for proc, _, _ in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc, _, _ in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        lines: list[str] = []
        for _, out, log in procs:
            if out.exists():
                lines.extend(out.read_text(errors="replace").splitlines())
                out.unlink()
            log.unlink(missing_ok=True)
        counts: collections.Counter[int] = collections.Counter()
        for stack, n in compact(lines).items():
            counts[self._ids.setdefault(stack, len(self._ids))] += n
        self._merged.update(counts)
        self.spans.append((since, until))
        self._slices.append((since, until, counts))

    def stop(self) -> None:
        """Stop every py-spy (SIGINT: it writes its file) and write what they sampled."""
        self._halt.set()
        if self._rotator is not None:
            self._rotator.join()
        if self._procs:
            self.wall_seconds = time.monotonic() - self._started
            self._finish(self._procs, self._since, time.time())
        self._procs = []
        if self.cpu_seconds:
            self.say(
                f"py-spy used {self.cpu_seconds:.1f} CPU-seconds in {self.wall_seconds:.0f} s "
                f"({self.cpu_seconds / max(self.wall_seconds, 1e-9):.2f} core) beside Keystone"
            )
        if not self._merged:
            return
        texts = {i: stack for stack, i in self._ids.items()}
        self.path = write_stacks(
            self.target, collections.Counter({texts[i]: n for i, n in self._merged.items()})
        )
        if self.slice_s:
            self.slices_path = write_slices(self.target, texts, self._slices)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of PID so far, from /proc (0 where it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def stored(path: Path) -> Path:
    """Where the stacks named PATH (``STEM-profile.txt``) are kept: PATH.xz."""
    return path.with_name(path.name + ".xz")


def write_stacks(path: Path, stacks: collections.Counter[str]) -> Path:
    """STACKS sorted (stacks that share a prefix side by side) and xz-compressed at
    stored(PATH). The token suite's 96.6 MB of py-spy output (its default size on a busy
    2-core AMD EPYC, 2026-11-29) became 434 kB, in 0.7 s of CPU after the load."""
    text = "".join(f"{s} {n}\n" for s, n in sorted(stacks.items()))
    out = stored(path)
    writer.write_bytes(out, lzma.compress(text.encode(), preset=1))
    return out


def slices_of(path: Path) -> Path:
    """Where the time-sliced stacks of PATH (``STEM-profile.txt``) are kept."""
    return path.with_name(f"{path.stem}-slices.txt.xz")


def write_slices(
    path: Path, stacks: Mapping[int, str], slices: Sequence[tuple[float, float, Mapping[int, int]]]
) -> Path:
    """STACKS (number -> text) once, then each slice: ``T START END`` and its ``NUMBER COUNT``
    lines; xz-compressed at slices_of(PATH)."""
    parts = [f"S {i} {text}\n" for i, text in sorted(stacks.items())]
    for since, until, counts in slices:
        parts.append(f"T {since:.3f} {until:.3f}\n")
        parts.extend(f"{i} {n}\n" for i, n in sorted(counts.items()))
    out = slices_of(path)
    writer.write_bytes(out, lzma.compress("".join(parts).encode(), preset=1))
    return out


def read_slices(path: Path) -> tuple[dict[int, str], list[tuple[float, float, dict[int, int]]]]:
    """What write_slices wrote: the stacks by number, and each slice's span and counts."""
    stacks: dict[int, str] = {}
    slices: list[tuple[float, float, dict[int, int]]] = []
    for line in lzma.decompress(path.read_bytes()).decode(errors="replace").splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "S":
            number, _, text = rest.partition(" ")
            stacks[int(number)] = text
        elif kind == "T":
            since, _, until = rest.partition(" ")
            slices.append((float(since), float(until), {}))
        elif kind.isdigit() and rest.isdigit() and slices:
            slices[-1][2][int(kind)] = int(rest)
    return stacks, slices


def read_lines(path: Path) -> list[str]:
    """The collapsed stacks at PATH: an .xz that write_stacks made, or plain text."""
    if path.suffix == ".xz":
        return lzma.decompress(path.read_bytes()).decode(errors="replace").splitlines()
    return path.read_text(errors="replace").splitlines()


def compact(lines: Sequence[str]) -> collections.Counter[str]:
    """py-spy's collapsed stacks without what no reader uses: the ``process PID:"argv"``
    frames (a uWSGI command line in every stack) and the install prefixes of paths
    (``.../site-packages/keystone/api/auth.py`` -> ``keystone/api/auth.py``); stacks
    that became the same are summed."""
    out: collections.Counter[str] = collections.Counter()
    for line in lines:
        text, _, count = line.rstrip().rpartition(" ")
        if not text or not count.isdigit():
            continue
        frames = [
            _PREFIX.sub("(", f) for f in text.split(";") if f and not f.startswith("process ")
        ]
        if frames:
            out[";".join(frames)] += int(count)
    return out


@contextlib.contextmanager
def profiled(
    pids: Sequence[int], path: Path, say: Callable[[str], None], slice_s: float | None = None
) -> Iterator[Profile]:
    """Profile PIDS (and their children) while the block runs; always stops py-spy.

    SLICE_S: keep the samples in slices of that many seconds (Profile).
    """
    prof = Profile(pids, path, say, slice_s)
    try:
        prof.start()
        yield prof
    finally:
        prof.stop()


def source_roots(venv: Path | None) -> list[Path]:
    """Where py-spy's short file names resolve for a Keystone in VENV: the trees its
    editable installs map (a local checkout), its site-packages, the directories its
    ``.pth`` files add, then its Python's standard library."""
    if venv is None:
        return []
    sites = sorted(Path(venv).glob("lib/python3*/site-packages"))
    roots = [*_editable_trees(sites), *sites]
    for pth in [p for root in sites for p in sorted(root.glob("*.pth"))]:
        for line in pth.read_text(errors="replace").splitlines():
            if line.startswith("/") and Path(line.strip()).is_dir():
                roots.append(Path(line.strip()))
    try:
        cfg = (Path(venv) / "pyvenv.cfg").read_text()
    except OSError:
        return roots
    fields = (line.partition("=") for line in cfg.splitlines())
    home = next((v.strip() for k, _, v in fields if k.strip() == "home"), None)
    if home is None:
        return roots
    for lib in Path(venv).glob("lib/python3*"):
        stdlib = Path(home).parent / "lib" / lib.name
        if stdlib.is_dir():
            roots.append(stdlib)
    return roots


_MAPPING = re.compile(r"^MAPPING\b[^=]*=\s*(\{.*\})\s*$", re.MULTILINE)


def _editable_trees(sites: Sequence[Path]) -> list[Path]:
    """The directories setuptools' editable finders (``__editable___*_finder.py``) map
    packages into: ``keystone`` -> TREE/keystone gives TREE."""
    trees: list[Path] = []
    for finder in [f for site in sites for f in sorted(site.glob("__editable___*_finder.py"))]:
        found = _MAPPING.search(finder.read_text(errors="replace"))
        try:
            mapping = ast.literal_eval(found.group(1)) if found else {}
        except (ValueError, SyntaxError):
            continue
        trees.extend(Path(str(p)).parent for p in mapping.values() if Path(str(p)).is_dir())
    return trees


def line_reader(roots: Sequence[Path], width: int = 80) -> Callable[[str, str], str | None]:
    """(file as py-spy names it, line number) -> that line's text, stripped, from ROOTS."""

    @functools.lru_cache(maxsize=256)
    def lines_of(path: str) -> tuple[str, ...] | None:
        candidates = [Path(path)] if Path(path).is_absolute() else [r / path for r in roots]
        for found in candidates:
            if ".." not in Path(path).parts and found.is_file():
                return tuple(found.read_text(errors="replace").splitlines())
        return None

    def read(path: str, line: str) -> str | None:
        lines = lines_of(path)
        if lines is None or not line.isdigit() or not 0 < int(line) <= len(lines):
            return None
        text = lines[int(line) - 1].strip()
        return text if len(text) <= width else text[: width - 3] + "..."

    return read
