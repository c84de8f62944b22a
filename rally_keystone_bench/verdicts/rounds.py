"""The matrix's rounds: requests per second of each workload over ``--repeat`` runs."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from typing import Any

_ROUND_RE = re.compile(r"^(?P<name>.*) \(run (?P<round>\d+)\)$")


def chart_action(rows: Sequence[dict[str, Any]]) -> str:
    """The action a workload's chart shows: its most frequent request, not ``total``.

    A serial token workload: keystone.issue_token (as often as total); a burst
    of 50 tokens per iteration: keystone.issue_token, not the burst.
    """
    return max(rows, key=lambda r: (r["count"], r["action"] != "total"))["action"]


def across_rounds(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per deployment, workload and charted action: requests per second over the rounds.

    A round is one ``--repeat`` run (rows of ``name (run k)``; one run is one
    round). An action's requests per second in a round are its successful
    requests over the workload's load duration: ``count x it/s / iterations``
    (the total row's it/s and count), so a burst of 50 tokens counts 50.
    """
    per_round: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        m = _ROUND_RE.match(r["deployment"])
        name = m.group("name") if m else r["deployment"]
        per_round.setdefault((name, r["setting"]), []).append(r)
    out = []
    for (name, setting), found in per_round.items():
        action = chart_action(found)
        values = []
        for deployment in dict.fromkeys(r["deployment"] for r in found):
            mine = [r for r in found if r["deployment"] == deployment]
            total = next((r for r in mine if r["action"] == "total"), None)
            row = next((r for r in mine if r["action"] == action), None)
            if total is None or row is None or not total["count"]:
                continue
            ok = row["count"] * row["success_percent"] / 100.0
            values.append(ok * total["throughput"] / total["count"])
        if not values:
            continue
        mean = statistics.fmean(values)
        out.append(
            {
                "deployment": name,
                "setting": setting,
                "action": action,
                "rounds": len(values),
                "requests_per_second": mean,
                "min": min(values),
                "max": max(values),
                "spread_percent": (max(values) - min(values)) / mean * 100 if mean else math.nan,
                "per_round": values,
            }
        )
    return out
