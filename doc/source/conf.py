"""Sphinx configuration of rally-keystone-bench's documentation (tox -e docs)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "rally-keystone-bench"
copyright = "rally-keystone-bench authors"  # noqa: A001 (Sphinx's name)
extensions = ["keystone_bench_reference"]
exclude_patterns = ["_build"]
templates_path = []
html_static_path = []
html_theme = "alabaster"
html_title = "rally-keystone-bench"
highlight_language = "none"
# Pages quote real output; a literal block that pygments cannot lex is kept as text.
suppress_warnings = ["misc.highlighting_failure"]
