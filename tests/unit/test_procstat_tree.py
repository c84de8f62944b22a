"""procstat.tree_pids: a process tree from /proc, grandchildren included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from rally_keystone_bench import procstat

# A child that starts a grandchild, prints its pid, then waits on it.
SPAWN = (
    "import subprocess, sys; "
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
    "print(p.pid, flush=True); p.wait()"
)


def test_the_tree_holds_the_root_its_child_and_grandchild_and_nothing_else():
    child = subprocess.Popen([sys.executable, "-c", SPAWN], stdout=subprocess.PIPE, text=True)
    grandchild = None
    try:
        grandchild = int(child.stdout.readline())
        assert procstat.tree_pids([child.pid]) == {child.pid, grandchild}
        assert procstat.tree_pids([grandchild]) == {grandchild}  # nothing above a root
        assert procstat.tree_pids([]) == set()
    finally:
        if grandchild is not None:
            os.kill(grandchild, signal.SIGKILL)
        child.kill()
        child.wait()
    assert procstat.tree_pids([child.pid]) == set()  # a root that is gone: no process
