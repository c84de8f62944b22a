"""Makes tests/ importable (``from _packages import require_package``) for every test,
and tests/fixtures (``import validation_cases``, ``import synthetic``).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures"))
