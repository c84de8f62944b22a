"""OSprofiler tracing of a local Keystone: the run's key, its trace store, reading it.

With ``Deployment(trace=True)`` Keystone's ``[profiler]`` section is on, with
SQL tracing, an HMAC key that is a secret of the run (``RUN_DIR/trace-key``,
0600) and a trace store the run owns: ``RUN_DIR/traces/``, JSON lines written
by the driver in ``templates/keystone_bench_tracing.py.j2``. Only requests that
carry headers signed with the key are traced (clients/tracing.py signs them).

Teardown removes the key, the store, and the key's copy in keystone.conf.

The client side finds the key through the environment (``KEY_FILE_ENV``,
``RATE_ENV``), which ``client_environment`` sets for the run's Rally or Locust
processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rally_keystone_bench import writer
from rally_keystone_bench.clients.tracing import KEY_FILE_ENV, RATE_ENV

DRIVER_SCHEME = "keystone-bench-traces"  # the driver's name in the template
KEY_FILE = "trace-key"
STORE_DIR = "traces"
_REMOVED = "(removed when the run ended)"


def key_path(run_dir: Path) -> Path:
    return Path(run_dir) / KEY_FILE


def store_path(run_dir: Path) -> Path:
    return Path(run_dir) / STORE_DIR


def prepare(run_dir: Path, key_text: str | None = None) -> None:
    """Create the run's key (0600, once) and an empty trace store (0700).

    KEY_TEXT: the key to write when there is none (the one a start found
    before it stopped and retried); else a new random one.
    """
    key = key_path(run_dir)
    if not key.exists():
        writer.create_private(key, key_text or secrets.token_hex(32) + "\n")
    store_path(run_dir).mkdir(mode=0o700, exist_ok=True)


def read_key(run_dir: Path) -> str | None:
    """The run's key file as it is (None: there is none); never for a log."""
    try:
        return key_path(run_dir).read_text()
    except OSError:
        return None


def same_key(run_dir: Path, other: Path) -> bool:
    """Whether RUN_DIR's Keystone holds the key OTHER's clients sign with (both present)."""
    mine, theirs = read_key(run_dir), read_key(other)
    return mine is not None and theirs is not None and mine.strip() == theirs.strip()


def config(run_dir: Path) -> dict[str, str]:
    """The values keystone.conf's ``[profiler]`` section is rendered from."""
    return {
        "hmac_key": key_path(run_dir).read_text().strip(),
        "connection_string": f"{DRIVER_SCHEME}://{store_path(run_dir).resolve()}",
    }


def remove(run_dir: Path, config_path: Path | None = None) -> bool:
    """Remove the key, the trace store and the key's copy in CONFIG_PATH; True if any was there."""
    found = False
    key = key_path(run_dir)
    if key.exists():
        key.unlink()
        found = True
    store = store_path(run_dir)
    if store.exists():
        shutil.rmtree(store, ignore_errors=True)
        found = True
    if config_path is not None and config_path.exists():
        lines = config_path.read_text().splitlines(keepends=True)
        scrubbed = [
            f"hmac_keys = {_REMOVED}\n" if line.startswith("hmac_keys = ") else line
            for line in lines
        ]
        if scrubbed != lines:
            writer.write_private(config_path, "".join(scrubbed))  # keystone.conf
            found = True
    return found


def read_records(run_dir: Path, prefix: str = "trace") -> list[dict[str, Any]]:
    """Every record in the trace store (PREFIX ``trace`` or ``audit``), file by file.

    A line cut short by a worker killed mid-write is skipped.
    """
    store = store_path(run_dir)
    records: list[dict[str, Any]] = []
    if not store.is_dir():
        return records
    for path in sorted(store.glob(f"{prefix}-*.jsonl")):
        records.extend(_parsed(path.read_text(errors="replace")))
    return records


def _parsed(text: str) -> list[dict[str, Any]]:
    """The records of TEXT's lines; a line that is not a JSON object is skipped."""
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def checked_out(run_dir: Path) -> dict[int, int]:
    """Per live Keystone process: the database connections it has checked out now.

    Each traced process keeps its count in ``traces/pool-PID.txt`` (SQLAlchemy's
    pool checkout and checkin events); a process that is gone is left out.
    """
    found: dict[int, int] = {}
    for path in sorted(store_path(run_dir).glob("pool-*.txt")):
        try:
            pid = int(path.stem.removeprefix("pool-"))
            count = int(path.read_text().strip() or 0)
            os.kill(pid, 0)
        except (ValueError, OSError):  # unreadable, or the process is gone
            continue
        found[pid] = count
    return found


TAKEN = "taken.json"  # in the store: per trace file, the bytes earlier takes have read


def take_records(run_dir: Path) -> list[dict[str, Any]]:
    """The trace records written since the last take (one task's traces apart from the next's).

    Each file is read from where the last take stopped up to its last complete
    line, and that place is kept in the store (TAKEN). Nothing is emptied: a
    worker appending while a take reads (it keeps its file open) loses no
    record; its line, if not complete yet, is the next take's.
    """
    store = store_path(run_dir)
    if not store.is_dir():
        return []
    marks_path = store / TAKEN
    marks: dict[str, int] = json.loads(marks_path.read_text()) if marks_path.exists() else {}
    records: list[dict[str, Any]] = []
    for path in sorted(store.glob("trace-*.jsonl")):
        start = marks.get(path.name, 0)
        with open(path, "rb") as found:
            found.seek(start)
            data = found.read()
        complete = data.rfind(b"\n") + 1
        records.extend(_parsed(data[:complete].decode(errors="replace")))
        marks[path.name] = start + complete
    writer.write_json(marks_path, marks, private=True)
    return records


@contextlib.contextmanager
def client_environment(run_dir: Path | None, rate: float | None = None) -> Iterator[None]:
    """Our clients (Rally's and Locust's processes started here) sign requests with the key.

    Nothing changes when RUN_DIR is None or its Keystone is not traced.
    """
    key = key_path(run_dir) if run_dir is not None else None
    if key is None or not key.exists():
        yield
        return
    saved = {name: os.environ.get(name) for name in (KEY_FILE_ENV, RATE_ENV)}
    os.environ[KEY_FILE_ENV] = str(key)
    if rate is not None:
        os.environ[RATE_ENV] = repr(rate)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
