"""keystone_bench_default_users: the KeystoneTokens scenarios' default users context."""

from __future__ import annotations

from typing import Any

from rally import consts
from rally.task import context

from rally_keystone_bench.plugins.contexts import _base

STOCK_USERS = "users@openstack"
DEFAULT_USERS = "keystone_bench_default_users@openstack"


@context.configure(
    name="keystone_bench_default_users", platform="openstack", order=100, hidden=True
)
class DefaultUsers(context.Context):
    """The KeystoneTokens scenarios' default context in place of the stock ``users``.

    Every OpenStack scenario has Rally's stock users context as a default,
    so it ran in each workload beside keystone_users, whose users the
    scenarios then used: a project and a user made and deleted for nothing,
    1.3 to 1.8 s of setup and cleanup a workload and a dozen admin
    tokens (seen in the tests' Rally logs). This one runs the stock context,
    with its defaults, where the workload names no users context of its own,
    and does nothing where it names keystone_users or users.

    The stock context is made here, not subclassed: its module reads
    Rally's [openstack] options when imported, which only a Rally process
    has registered, and every module of this package must import without.
    """

    CONFIG_SCHEMA = {"type": "object", "$schema": consts.JSON_SCHEMA, "additionalProperties": False}

    def __init__(self, ctx: dict[str, Any]) -> None:
        super().__init__(ctx)
        named = set(ctx.get("config") or {}) & {_base.USERS, STOCK_USERS}
        self.stock: Any = None  # the stock context, where it runs
        if not named:
            from rally_openstack.task.contexts.keystone.users import UserGenerator

            self.stock = UserGenerator(ctx)  # reads its (absent) config: its defaults

    @property
    def skipped(self) -> bool:
        return self.stock is None

    def setup(self) -> None:
        if self.stock is not None:
            self.stock.setup()

    def cleanup(self) -> None:
        if self.stock is not None:
            self.stock.cleanup()
