"""Ctrl-C stops a verb that inherited SIGINT ignored (a script's background job)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

# A verb that sends itself SIGINT and then waits: it must end with 130 at once.
VERB = textwrap.dedent(
    """
    import os, signal, sys, time
    from rally_keystone_bench import boundary

    def verb():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(20)
        return 0

    sys.exit(boundary.run(verb))
    """
)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_verb_started_with_sigint_ignored_exits_130_on_ctrl_c():
    proc = subprocess.run(
        [sys.executable, "-c", VERB],
        capture_output=True,
        text=True,
        timeout=15,  # the verb would sleep 20 s through an ignored SIGINT
        preexec_fn=_ignore_sigint,
    )
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == "keystone-bench: interrupted"
