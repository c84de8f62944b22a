"""Makes tests/ importable (``from _packages import require_package``) for every test,
and tests/fixtures (``import validation_cases``, ``import synthetic``); runs the
longest test files first and says which files took longest (``_file_order.py``).
"""

import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures"))

import _file_order  # noqa: E402


def pytest_collection_modifyitems(session, config, items):
    _file_order.reorder(items)


def pytest_runtest_logreport(report):
    _file_order.CLOCK.add(report.nodeid, report.duration)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    _file_order.summary(terminalreporter, config)


def _modes_above_run_dirs() -> dict[str, int]:
    """The mode of the home directory, its cache, and every directory above a run directory."""
    places = [Path.home() / ".cache", Path.cwd() / ".keystone-bench" / "runs"]
    places.append(Path(tempfile.gettempdir()) / "x")
    found = {}
    for place in places:
        for p in [place, *place.parents]:
            if p.exists():
                found[str(p)] = os.stat(p).st_mode
    return found


@pytest.fixture(scope="session", autouse=True)
def no_mode_changes_outside_the_tools_directories():
    """After the whole session, the home directory and every directory above a run
    directory have the modes they had before (issue 45: Apache's user once got o+x
    on /root and ~/.cache)."""
    before = _modes_above_run_dirs()
    yield
    after = _modes_above_run_dirs()
    changed = {p: f"{before[p]:o} -> {after[p]:o}" for p in before if after.get(p) != before[p]}
    assert not changed, f"modes changed: {changed}"
