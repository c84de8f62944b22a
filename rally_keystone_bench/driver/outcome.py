"""What one ``rally task start`` came to: its uuid, exit code, reports and verdict inputs."""

from __future__ import annotations

import dataclasses
import signal
from pathlib import Path
from typing import Any


@dataclasses.dataclass
class TaskOutcome:
    task_file: Path
    uuid: str | None
    rally_exit: int
    json_report: Path | None = None
    html_report: Path | None = None
    summary: Path | None = None  # summary.html, once written (task_reports.write_summary)
    summary_dir: Path | None = None  # where it goes: STEM-summary beside Rally's reports
    summary_doc: dict | None = None  # summary.json's document as written, for the history
    workloads: list = dataclasses.field(default_factory=list)
    interrupted_by: int | None = None  # the signal that stopped the task, if one did
    cleanup_cut_short: bool = False  # a second signal stopped Rally before its cleanup ended
    workload_uuids: list = dataclasses.field(default_factory=list)  # names of what it created
    contexts_failed: bool = False  # a context's cleanup said something was left behind
    counters: list = dataclasses.field(default_factory=list)  # per workload: Keystone's costs
    checked_out: int | None = None  # Keystone's DB connections checked out after the load
    sampler: Any = None  # procstat.Sampler of the task (driver/machine.py)
    machine: Any = None  # verdicts.machine.MachineState of its load windows
    # Keystone's side, for the summary (driver/counters.gather): its flame graphs, what
    # summary.json keeps of the profile, and the traced Keystone's state after the load
    flames: Any = None
    profile: dict | None = None
    keystone: dict | None = None

    @property
    def interrupted(self) -> str | None:
        """``interrupted by SIGTERM`` when a signal stopped the task."""
        if self.interrupted_by is None:
            return None
        return f"interrupted by {signal.Signals(self.interrupted_by).name}"

    @property
    def no_verdict(self) -> str | None:
        """Why the task gets no SLA verdict: a signal stopped it, or Rally was killed."""
        if self.interrupted:
            return self.interrupted
        if self.uuid is not None and self.rally_exit < 0:
            return f"rally task start exited {self.rally_exit}"
        return None

    @property
    def may_have_left(self) -> bool:
        """Whether the task's contexts may have left what they created.

        A second signal cut Rally's cleanup short, Rally was killed (a
        negative exit code: no cleanup ran), or a context's cleanup said so.
        """
        if not self.workload_uuids:
            return False  # no workload started: no context created anything
        return self.cleanup_cut_short or self.rally_exit < 0 or self.contexts_failed

    @property
    def sla_passed(self) -> bool:
        """Never for an interrupted or killed task: Rally judged only what ran before."""
        return (
            self.no_verdict is None
            and bool(self.workloads)
            and all(wl.pass_sla for wl in self.workloads)
        )
