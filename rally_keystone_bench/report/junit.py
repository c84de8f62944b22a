"""The one JUnit XML builder: a test suite of verdicts, a test case each."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclasses.dataclass(frozen=True)
class Case:
    """One verdict: where it was judged, what, the verdict sentence and its numbers."""

    classname: str
    name: str
    verdict: str
    numbers: str
    outcome: str = PASSED
    kind: str = "regression"  # the failure's type
    said: str | None = None  # its system-out (default: the verdict; its numbers)


def _case(c: Case) -> str:
    said = c.verdict + "; " + c.numbers if c.said is None else c.said
    body = f"<system-out>{escape(said)}</system-out>"
    if c.outcome == FAILED:
        body = (
            f"<failure message={quoteattr(c.verdict)} type={quoteattr(c.kind)}>"
            f"{escape(c.numbers)}</failure>" + body
        )
    elif c.outcome == SKIPPED:
        body = f"<skipped message={quoteattr(c.verdict)}/>" + body
    return (
        f"  <testcase classname={quoteattr(c.classname)} name={quoteattr(c.name)} "
        f'time="0">{body}</testcase>'
    )


def render(suite: str, cases: Sequence[Case]) -> str:
    """A JUnit test suite named SUITE: a regression fails, an inconclusive verdict is skipped."""
    failures = sum(c.outcome == FAILED for c in cases)
    skipped = sum(c.outcome == SKIPPED for c in cases)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name="{suite}" tests="{len(cases)}" '
        f'failures="{failures}" errors="0" skipped="{skipped}">\n'
        + "\n".join(_case(c) for c in cases)
        + "\n</testsuite>\n"
    )
