"""SIGINT and SIGTERM during a task: stop the load, keep what was measured, clean up.

``start_task`` registers the task it runs in ``running``; the first signal
asks that task to stop (``TaskRun.interrupt``: ``rally task abort``, its
contexts clean up), a second one stops at once. Verbs put their work under
:func:`sigterm_as_interrupt`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

from rally_keystone_bench.errors import Interrupted

ABORT_WAIT_S = 120.0  # after a signal: Rally's runner stops, then its contexts clean up
KILL_GRACE_S = 10.0  # then SIGINT to Rally, and SIGKILL this long after

# The task running now (start_task registers it) and the signals received.
running: list[Any] = []  # driver.task.TaskRun, registered by start_task
_signals: list[int] = []
_mode = {"later_noted": False}  # sigterm_as_interrupt(later_noted=True): see there


def _on_signal(signum: int, frame: Any) -> None:
    """SIGINT and SIGTERM alike: the first stops the running task and keeps its results.

    With a task running, Rally is told to abort (``rally task abort``) and its
    output is read to the end while its contexts clean up (bounded by
    ABORT_WAIT_S); start_task then raises Interrupted, and the reports of
    what ran are written before the Keystone stops. Without one, or at a
    second signal, Interrupted is raised at once (the Keystone still stops).
    """
    _signals.append(signum)
    run = running[-1] if running else None
    if run is not None and len(_signals) == 1:
        # The handler runs between two bytecodes of the main thread, which
        # may be inside a write to the log or to stderr: a write from here
        # would be reentrant. The stopping (and its messages) is a thread's.
        run.interrupted_by = signum
        threading.Thread(target=run.interrupt, args=(signum,), daemon=True).start()
        return
    if len(_signals) > 1 and _mode["later_noted"]:
        # os.write: no buffered stream, which the main thread may be writing to.
        name = signal.Signals(signum).name
        note = f"keystone-bench: {name} again: still writing what was gathered, which is kept\n"
        with contextlib.suppress(OSError):
            os.write(2, note.encode())
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def sigterm_as_interrupt(later_noted: bool = False) -> Iterator[None]:
    """SIGINT and SIGTERM stop the load, keep what was measured and clean up (see _on_signal).

    With LATER_NOTED, a signal after the first is only noted on stderr: what
    the first one set going (collecting and writing the results gathered)
    runs to its end, bounded by its own timeouts, and the exit code is the
    first signal's.
    """
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    _signals.clear()
    _mode["later_noted"] = later_noted
    try:
        yield
    finally:
        _mode["later_noted"] = False
        for s, handler in previous.items():
            signal.signal(s, handler)
