"""Sphinx configuration of rally-keystone-bench's documentation (tox -e docs)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "rally-keystone-bench"
copyright = "rally-keystone-bench authors"  # noqa: A001 (Sphinx's name)
extensions = ["keystone_bench_reference", "openstackdocstheme"]
exclude_patterns = ["_build"]
templates_path = []
html_static_path = ["_static"]
html_css_files = ["keystone-bench.css"]
# OpenStack's theme (openstackdocstheme): a content column about 850 px wide
# at 1400 px, where Alabaster's left ~410 px for the output blocks.
html_theme = "openstackdocs"
openstackdocs_repo_name = "openstack/rally-keystone-bench"
openstackdocs_auto_name = False  # the project's name is set above, not read from setup.cfg
openstackdocs_use_storyboard = False
openstackdocs_bug_project = "rally-keystone-bench"
openstackdocs_bug_tag = "docs"
html_title = "rally-keystone-bench"
highlight_language = "none"
# Pages quote real output; a literal block that pygments cannot lex is kept as text.
suppress_warnings = ["misc.highlighting_failure"]
