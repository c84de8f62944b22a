"""The one writer of files: every file the package writes is written here.

Whole files are written atomically (a temporary file beside the target,
renamed over it: a kill mid-write leaves the old file whole, never half a
record), as text, bytes or JSON; ``private`` ones are their owner's only
(0600) from the first byte: a Keystone's configuration and state, Rally's
home, passwords, keys, openrc files. A stream (a log a process writes as it
runs, a lock) is opened here too, and so are temporary directories.

It sits on the bottom floor beside ``errors.py`` and imports only the
standard library, so that every room may use it: report/ writes the outputs
a user reads through it, deploy/ its deployments' files (``deploy/files.py``
renders them), the driver Rally's home, the engines the Locust master's files
and plugins/ the reuse state. ``tests/unit/test_layers.py`` fails on a write
anywhere else.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

PRIVATE = 0o600  # the owner's only
SHARED = 0o666  # as open(..., "w") creates a file: the umask decides


def _temporary(path: Path, mode: int) -> tuple[Path, int]:
    """A new file beside PATH, open for writing; an error names PATH, not it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None


@contextlib.contextmanager
def _replacing(path: Path, mode: int) -> Iterator[IO[bytes]]:
    """A new file beside PATH to write (MODE), renamed over PATH when the block ends;
    removed, PATH untouched, when it raises."""
    tmp, fd = _temporary(path, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
        if mode == PRIVATE:
            os.chmod(tmp, PRIVATE)  # whatever the umask left of it
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _target(path: str | os.PathLike) -> Path:
    """Where PATH's bytes go: a symbolic link's target (the link stays)."""
    path = Path(path)
    return path.resolve() if path.is_symlink() else path


def write_bytes(path: str | os.PathLike, data: bytes, private: bool = False) -> Path:
    """DATA into PATH, atomically; PRIVATE: readable by its owner only from the first byte.

    A PATH that is no regular file (``--json /dev/stdout``, a pipe) is written in place.
    """
    path = Path(path)
    target = _target(path)
    if target.exists() and not target.is_file():
        with open(target, "wb") as out:
            out.write(data)
        return path
    with _replacing(target, PRIVATE if private else SHARED) as out:
        out.write(data)
    return path


def write_text(path: str | os.PathLike, text: str, private: bool = False) -> Path:
    """TEXT (UTF-8) into PATH, atomically; PRIVATE: its owner's only."""
    return write_bytes(path, text.encode("utf-8"), private)


def write_private(path: str | os.PathLike, text: str) -> Path:
    """TEXT into PATH, atomically, readable by its owner only (0600) from the first byte."""
    return write_text(path, text, private=True)


def write_json(
    path: str | os.PathLike,
    doc: Any,
    indent: int | None = 2,
    newline: bool = True,
    private: bool = False,
    **dumps: Any,
) -> Path:
    """DOC as JSON into PATH (json.dumps's INDENT and DUMPS options), with a final NEWLINE."""
    text = json.dumps(doc, indent=indent, **dumps) + ("\n" if newline else "")
    return write_text(path, text, private)


def create_private(path: str | os.PathLike, text: str) -> Path:
    """A new file at PATH holding TEXT, its owner's only; FileExistsError if one is there
    (a key made once: two processes never both make it)."""
    path = Path(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    return path


def copy(source: str | os.PathLike, path: str | os.PathLike) -> Path:
    """SOURCE's bytes into PATH, atomically (the mode of a new file, not SOURCE's)."""
    path = Path(path)
    with open(source, "rb") as src, _replacing(path, SHARED) as out:
        shutil.copyfileobj(src, out)
    return path


def move(source: str | os.PathLike, path: str | os.PathLike) -> Path:
    """SOURCE moved to PATH (replacing it): a rename on one file system, else a copy then
    an unlink, as ``shutil.move``. A file another program made, put where it belongs."""
    path = Path(path)
    shutil.move(os.fspath(source), path)
    return path


def touch(path: str | os.PathLike) -> Path:
    """PATH made empty if it is missing; an existing file is left as it is."""
    path = Path(path)
    path.touch()
    return path


def open_stream(path: str | os.PathLike, mode: str = "a", buffering: int = -1) -> IO[Any]:
    """PATH opened to be written as things happen (MODE "w", "a", "wb" or "ab"): a log a
    process or a watcher writes line by line, a lock file. The caller closes it."""
    if mode not in ("w", "a", "wb", "ab"):
        raise ValueError(f"a stream is opened to write or append, not {mode!r}")
    encoding = None if "b" in mode else "utf-8"
    return open(path, mode, buffering=buffering, encoding=encoding)


def temporary_directory(prefix: str) -> tempfile.TemporaryDirectory:
    """A temporary directory (removed when its context ends, or by ``cleanup()``)."""
    return tempfile.TemporaryDirectory(prefix=prefix)


@contextlib.contextmanager
def devnull() -> Iterator[int]:
    """A file descriptor of /dev/null open for writing (to point a broken stdout at)."""
    fd = os.open(os.devnull, os.O_WRONLY)
    try:
        yield fd
    finally:
        os.close(fd)
