"""Rally exporter ``keystone-bench-summary``: our summary from ``rally task export``.

    rally task export UUID --type keystone-bench-summary --to DIR

writes DIR/summary.html and DIR/summary.json, the same files as
``keystone-bench report``. Without ``--to`` it prints summary.json.
"""

from __future__ import annotations

import os
from typing import Any

from rally.task import exporter


def to_json_report(tasks_results: list[dict[str, Any]]) -> dict[str, Any]:
    """Rally's task results (from its database) in the shape of its JSON report."""
    tasks = []
    for task in tasks_results:
        subtasks = []
        for sub in task.get("subtasks", []):
            workloads = []
            for wl in sub.get("workloads", []):
                entry = {k: v for k, v in wl.items() if k not in ("name", "args", "runner_type")}
                entry["scenario"] = {wl["name"]: wl.get("args") or {}}
                entry["runner"] = {wl["runner_type"]: wl.get("runner") or {}}
                workloads.append(entry)
            subtasks.append(
                {**{k: v for k, v in sub.items() if k != "workloads"}, "workloads": workloads}
            )
        tasks.append({**{k: v for k, v in task.items() if k != "subtasks"}, "subtasks": subtasks})
    return {"info": {"format_version": "1.2"}, "tasks": tasks}


@exporter.configure("keystone-bench-summary")
class SummaryExporter(exporter.TaskExporter):
    """summary.html and summary.json of keystone-bench, into the --to directory."""

    def generate(self) -> dict[str, Any]:
        from rally_keystone_bench.report import render
        from rally_keystone_bench.verdicts import results

        uuids = ", ".join(str(t.get("uuid", "")) for t in self.tasks_results)
        workloads = results.from_report(to_json_report(self.tasks_results), name=uuids)
        files = render.render_files(workloads, f"rally task {uuids}")
        if not self.output_destination:
            return {"print": files["summary.json"]}
        out_dir = os.path.abspath(os.path.expanduser(self.output_destination))
        # Rally writes each file with open(); the directory must exist first.
        os.makedirs(out_dir, exist_ok=True)
        html = os.path.join(out_dir, "summary.html")
        return {
            "files": {
                html: files["summary.html"],
                os.path.join(out_dir, "summary.json"): files["summary.json"],
            },
            "open": "file://" + html,
        }
