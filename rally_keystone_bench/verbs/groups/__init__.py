"""Option groups: each group of a verb's options declared once, with one type, one
default and one meaning, the targets and engines it applies to, and its frozen settings.

A verb composes the groups it takes in ``add_arguments`` and makes each group's
settings at its door (``main``, or the ``at_the_door`` it calls);
verbs/applicability.py checks the rules the groups a verb composed declare
(``applies``).
"""

from rally_keystone_bench.verbs.groups.base import LOCAL, LOCUST, MOCK, RALLY, OptionGroup, rules
from rally_keystone_bench.verbs.groups.deployment import ConfSet, Deployment, Identity
from rally_keystone_bench.verbs.groups.target import Engine, Mock, Target
from rally_keystone_bench.verbs.groups.verdict import Counters, Tracing, VerdictRules

__all__ = [
    "LOCAL",
    "LOCUST",
    "MOCK",
    "RALLY",
    "ConfSet",
    "Counters",
    "Deployment",
    "Engine",
    "Identity",
    "Mock",
    "OptionGroup",
    "Target",
    "Tracing",
    "VerdictRules",
    "rules",
]
