"""Makes tests/ importable (``from _packages import require_package``) for every test,
and tests/fixtures (``import validation_cases``, ``import synthetic``); runs the
longest test files first and says which files took longest (``_file_order.py``).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures"))

import _file_order  # noqa: E402


def pytest_collection_modifyitems(session, config, items):
    _file_order.reorder(items)


def pytest_runtest_logreport(report):
    _file_order.CLOCK.add(report.nodeid, report.duration)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    _file_order.summary(terminalreporter, config)
