"""The one place where an error becomes an exit code and a line on stderr.

Every verb runs inside :func:`run`: bad input or environment (BenchError,
and an OSError no verb caught) is one line and exit 2; a failed verdict is
exit 1; Ctrl-C is 130 (also for a verb started as a script's background
job, which inherits SIGINT ignored) and SIGTERM 143, both through the one
handler installed here for the verb's whole life (a verb may install its
own for a while, as the load's does, and restores this one); anything
unexpected is one line naming the exception type, exit 2 (never 1, which
means a verdict), with the traceback under ``--debug``. Output into a
closed pipe (``compare ... | head``) is dropped quietly and the verb still
finishes and exits with its own code. Every URL in a message has its
password masked.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import re
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from rally_keystone_bench import errors, writer
from rally_keystone_bench.errors import mask_urls

PROG = "keystone-bench"


def one_line(text: object, limit: int = 500) -> str:
    """A message on one line, URLs masked, at most LIMIT characters."""
    line = mask_urls(" ".join(str(text).split()))
    return line if len(line) <= limit else line[: limit - 1] + "…"


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line: what is wrong, then where to look."""

    def error(self, message: str) -> Any:
        # "argument --port: must be ..." reads better as "--port must be ...".
        message = re.sub(r"^argument (\S+): must ", r"\1 must ", message)
        self.exit(
            errors.EXIT_BAD_INPUT,
            f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n",
        )


# -- argument types: numbers checked as numbers ----------------------------------
def _number(text: str, kind: type) -> Any:
    try:
        value = kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def number_in(low: float | None = None, high: float | None = None, kind: type = float):
    """An argparse type: a finite number (an integer with KIND=int) in [LOW, HIGH]."""

    def parse(text: str) -> Any:
        value = _number(text, kind)
        if (low is not None and value < low) or (high is not None and value > high):
            if high is None:
                raise argparse.ArgumentTypeError(f"must be at least {low:g}, not {value}")
            if low is None:
                raise argparse.ArgumentTypeError(f"must be at most {high:g}, not {value}")
            raise argparse.ArgumentTypeError(f"must be between {low:g} and {high:g}, not {value}")
        return value

    parse.__name__ = "integer" if kind is int else "number"
    return parse


port = number_in(1, 65535, int)
positive_int = number_in(1, None, int)
non_negative = number_in(0.0)
fraction = number_in(0.0, 1.0)


# -- stdout into a closed pipe ----------------------------------------------------
class _PipeSafe(io.TextIOBase):
    """A stdout that drops what it cannot write once the reader is gone."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.broken = False

    def _drop(self) -> None:
        self.broken = True
        # Python flushes stdout at exit: point fd 1 at /dev/null so that cannot fail.
        try:
            fd = self.stream.fileno()
            with writer.devnull() as devnull:
                os.dup2(devnull, fd)
        except (OSError, ValueError, io.UnsupportedOperation):
            pass

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._drop()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")


def _say(message: str) -> None:
    try:
        print(f"{PROG}: {message}", file=sys.stderr, flush=True)
    except (BrokenPipeError, ValueError):
        pass


def _terminate(signum: int, frame: Any) -> None:
    """SIGTERM as Ctrl-C: unwind the verb (what it started stops on the way out), exit 143."""
    raise errors.Interrupted(signum)


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM unwind the verb alike (KeyboardInterrupt, Interrupted) while it runs.

    Without this, SIGTERM would end the process at once, leaving every server
    a ``keystone up`` had started so far running. SIGINT is set too: bash
    starts a script's background job (``keystone-bench mock &``) with SIGINT
    ignored, and Python then never installs its handler, so the verb would
    serve on through every Ctrl-C. Outside the main thread (a test calling a
    verb from a thread), nothing is installed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handlers = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: _terminate}
    previous = {s: signal.signal(s, h) for s, h in handlers.items()}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run(verb: Callable[[], Any], debug: bool = False) -> int:
    """Run VERB and turn what it returns or raises into an exit code."""
    with _signals_interrupt():
        return _run(verb, debug)


def _run(verb: Callable[[], Any], debug: bool) -> int:
    stdout = sys.stdout
    sys.stdout = _PipeSafe(stdout)
    try:
        rc = verb()
        sys.stdout.flush()
        return int(rc or 0)
    except errors.BenchError as exc:
        _say(one_line(exc))
        return errors.EXIT_BAD_INPUT
    except errors.VerdictFailed as exc:
        _say(one_line(exc))
        return errors.EXIT_VERDICT
    except errors.Interrupted as exc:
        _say(f"interrupted by {exc.signal_name}")
        return exc.exit_code
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    except OSError as exc:
        if debug:
            traceback.print_exc()
        where = f": {exc.filename}" if exc.filename else ""
        _say(one_line(f"{exc.strerror or exc}{where}"))
        return errors.EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - the boundary: nothing escapes as a traceback
        if debug:
            traceback.print_exc()
            _say(one_line(f"unexpected error: {type(exc).__name__}: {exc}"))
        else:
            _say(
                one_line(f"unexpected error: {type(exc).__name__}: {exc}")
                + f" (run {PROG} --debug ... for the traceback)"
            )
        return errors.EXIT_BAD_INPUT
    finally:
        sys.stdout = stdout
