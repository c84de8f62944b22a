"""keystone_bench_default_users: the KeystoneTokens scenarios' default users context.

Its own module: rally-openstack's users context reads Rally's [openstack]
options when its module is imported, which only a Rally process has
registered (Rally loads this package's plugins after them).
"""

from __future__ import annotations

from typing import Any

from rally.task import context
from rally_openstack.task.contexts.keystone import users as stock_users

from rally_keystone_bench.plugins.contexts import _base

STOCK_USERS = "users@openstack"
DEFAULT_USERS = "keystone_bench_default_users@openstack"


@context.configure(
    name="keystone_bench_default_users", platform="openstack", order=100, hidden=True
)
class DefaultUsers(stock_users.UserGenerator):
    """The KeystoneTokens scenarios' default context in place of the stock ``users``.

    Every OpenStack scenario has Rally's stock users context as a default,
    so it ran in each workload beside keystone_users, whose users the
    scenarios then used: a project and a user made and deleted for nothing,
    about 1.5 to 2 s of setup and cleanup a workload and a dozen admin
    tokens (seen in the tests' Rally logs). This one is the stock context
    itself where the workload names no users context of its own, and does
    nothing where it names keystone_users or users.
    """

    def __init__(self, ctx: dict[str, Any]) -> None:
        named = set(ctx.get("config") or {}) & {_base.USERS, STOCK_USERS}
        self.skipped = bool(named)
        if self.skipped:
            context.Context.__init__(self, ctx)  # no admin session, nothing to create
        else:
            super().__init__(ctx)

    def setup(self) -> None:
        if not self.skipped:
            super().setup()

    def cleanup(self) -> None:
        if not self.skipped:
            super().cleanup()
