"""What Rally loads: scenarios, contexts, the SLA, the runner and the exporter.

The ``rally_plugins`` entry point names this package, so Rally imports every
module below it and nothing else of rally_keystone_bench. No module here may
do work at import time, and none may import ``verbs``, ``capacity``,
``deploy`` or ``engines``.
"""
