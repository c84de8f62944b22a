"""Errors that the keystone-bench command turns into exit codes."""

from __future__ import annotations

import os
import re

EXIT_OK = 0
EXIT_VERDICT = 1
EXIT_BAD_INPUT = 2


class BenchError(Exception):
    """Bad input or environment: one line on stderr and exit code 2.

    The message must never hold a token value or a password.
    """

    exit_code = EXIT_BAD_INPUT


class VerdictFailed(Exception):
    """A verdict failed (SLA, regression, degradation): exit code 1."""

    exit_code = EXIT_VERDICT


def read_input(path: str | os.PathLike[str], what: str) -> str:
    """The text of an input file (a UTF-8 BOM is dropped).

    BenchError naming WHAT and PATH when it is missing, a directory,
    unreadable, empty, binary or not UTF-8.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise BenchError(f"{what} {name} does not exist") from None
    except IsADirectoryError:
        raise BenchError(f"{what} {name} is a directory, not a file") from None
    except OSError as exc:
        raise BenchError(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    if not data.strip():
        raise BenchError(f"{what} {name} is empty")
    if b"\x00" in data:
        raise BenchError(f"{what} {name} is a binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BenchError(f"{what} {name} is not UTF-8 text") from None


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM: exit 128 + the signal's number (130, 143), results kept.

    ``outcome`` is what the interrupted task wrote, when a task was running.
    """

    def __init__(self, signum: int = 2, outcome: object = None) -> None:
        super().__init__(signum)
        self.signum = signum
        self.outcome = outcome

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def signal_name(self) -> str:
        import signal

        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"


# scheme://user:password@host -> scheme://user:***@host (any scheme, any user).
_URL_PASSWORD_RE = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s]*):[^@/\s]*@")


def mask_urls(text: str) -> str:
    """TEXT with the password of every ``scheme://user:password@host`` replaced by ***."""
    return _URL_PASSWORD_RE.sub(r"\1:***@", text)
