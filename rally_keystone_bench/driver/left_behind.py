"""What a Rally task cut short on an existing cloud may have left, and its cleanup command.

Shared by every verb that runs our contexts on a cloud (``run
--existing-cloud``, ``capacity --target cloud``, ``load --engine rally
--target cloud``): a task whose contexts did not clean up to their end (a
second signal, Rally killed, a context's cleanup failing) gets one line
that names what may be left and the ``keystone-bench cleanup --workload-id``
command that deletes exactly that (plugins/contexts/leftovers.py). A local
Keystone or the mock needs none of it: it goes with whatever was left in it.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterator, Sequence
from pathlib import Path

from rally_keystone_bench.driver import task_reports
from rally_keystone_bench.driver.outcome import TaskOutcome
from rally_keystone_bench.driver.task import TaskRun
from rally_keystone_bench.plugins.contexts import leftovers


def cleanup_command(workload_uuids: Sequence[str], spec: str | None = None) -> str:
    """The ``keystone-bench cleanup`` command that deletes what these workloads left."""
    words = ["keystone-bench", "cleanup"]
    for w in workload_uuids:
        words += ["--workload-id", leftovers.short_id(w)]
    if spec:
        words += ["--spec", shlex.quote(str(Path(spec).resolve()))]
    return " ".join(words)


def why(outcome: TaskOutcome) -> str:
    """Why OUTCOME's contexts may not have cleaned up."""
    if outcome.cleanup_cut_short:
        return "interrupted twice: cleanup cut short"
    if outcome.rally_exit < 0:
        return f"rally task start exited {outcome.rally_exit} before its cleanup ended"
    return "a context's cleanup failed"


def left_behind_lines(
    outcomes: Sequence[TaskOutcome], auth_url: str, spec: str | None
) -> list[str]:
    """One line per task of OUTCOMES that may have left something: what, where, the command."""
    lines = []
    for o in outcomes:
        if not o.may_have_left:
            continue
        names = ", ".join(f"{p}*" for w in o.workload_uuids for p in leftovers.prefixes(w))
        where = "" if spec else ", the same OS_* variables set"
        lines.append(
            f"{why(o)}. May be left in the cloud at {auth_url}: users, projects, roles, groups, "
            f"services and regions named {names} (task {o.uuid}). Delete them{where}, with: "
            f"{cleanup_command(o.workload_uuids, spec)}"
        )
    return lines


def load_line(run_id: str, what: str, auth_url: str, spec: str | None) -> str:
    """WHAT a Locust load RUN_ID left in the cloud at AUTH_URL, and the command that deletes it."""
    words = ["keystone-bench", "cleanup", "--load", run_id]
    if spec:
        words += ["--spec", shlex.quote(str(Path(spec).resolve()))]
    where = "" if spec else ", the same OS_* variables set"
    return (
        f"the Locust master did not delete what it made. Left in the cloud at {auth_url}: "
        f"{what}. Delete them{where}, with: {' '.join(words)}"
    )


def say_left_behind(outcomes: Sequence[TaskOutcome], auth_url: str, spec: str | None) -> None:
    """Print (stdout) what OUTCOMES may have left in the cloud at AUTH_URL, and its cleanup."""
    for line in left_behind_lines(outcomes, auth_url, spec):
        print(line)


def outcome_of(run: TaskRun, twice: bool = False) -> TaskOutcome:
    """What a verb that runs its own ``rally task start`` needs to say what RUN left.

    TWICE: a second signal stopped Rally (``Interrupted.twice``).
    """
    outcome = TaskOutcome(run.task_file, None, -1, interrupted_by=run.interrupted_by)
    task_reports.describe_run(outcome, run, run.log_path)
    outcome.cleanup_cut_short = twice
    return outcome


@contextlib.contextmanager
def recorded(tasks: list[TaskOutcome]) -> Iterator[None]:
    """Around a ``start_task``: the task's outcome appended to TASKS when a signal cuts it short.

    (A task that ends on its own is appended by the caller: ``outcome_of(run)``.)
    """
    try:
        yield
    except KeyboardInterrupt as exc:
        run = getattr(exc, "run", None)
        if run is not None:
            tasks.append(outcome_of(run, twice=getattr(exc, "twice", False)))
        raise
