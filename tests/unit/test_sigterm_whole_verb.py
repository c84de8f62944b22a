"""SIGTERM takes Ctrl-C's path for the whole life of every verb (issue 45, item 1).

A verb that starts a process and stops it on the way out, as ``keystone up``
does while it starts a deployment: SIGTERM exits 143 with one line and the
process is stopped, as SIGINT exits 130.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

VERB = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    from rally_keystone_bench import boundary

    def verb():
        child = subprocess.Popen(["sleep", "60"])
        print(child.pid, flush=True)
        try:
            os.kill(os.getpid(), signal.{sig})
            time.sleep(20)
            return 0
        finally:
            child.terminate()
            child.wait()

    sys.exit(boundary.run(verb))
    """
)


@pytest.mark.parametrize(("sig", "code"), [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_during_a_verb_stops_what_it_started(sig, code):
    proc = subprocess.run(
        [sys.executable, "-c", VERB.replace("{sig}", sig)],
        capture_output=True,
        text=True,
        timeout=15,  # the verb sleeps 20 s unless the signal unwinds it
    )
    assert proc.returncode == code, proc.stderr
    said = "interrupted" if sig == "SIGINT" else "interrupted by SIGTERM"
    assert proc.stderr.strip() == f"keystone-bench: {said}"
    child = int(proc.stdout.split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


def test_the_handlers_before_the_verb_are_restored():
    from rally_keystone_bench import boundary

    before = signal.getsignal(signal.SIGTERM)
    assert boundary.run(lambda: signal.getsignal(signal.SIGTERM) is not before and 5) == 5
    assert signal.getsignal(signal.SIGTERM) is before
