"""Validators of KeystoneTokens arguments, run by `rally task validate`."""

from __future__ import annotations

import inspect
from typing import Any

from rally.common import validation


def _argument(plugin_cls: Any, config: dict | None, name: str) -> Any:
    """The argument as the task gives it, else the default of run()."""
    args = (config or {}).get("args") or {}
    if name in args:
        return args[name]
    parameter = inspect.signature(plugin_cls.run).parameters.get(name)
    if parameter is None or parameter.default is inspect.Parameter.empty:
        return None
    return parameter.default


@validation.configure(name="keystone_bench_not_greater_than")
class NotGreaterThan(validation.Validator):
    """Checks that one numeric argument does not exceed another.

    :param param_name: the argument that must not be greater
    :param limit_param: the argument it is compared with
    """

    def __init__(self, param_name: str, limit_param: str) -> None:
        super().__init__()
        self.param_name = param_name
        self.limit_param = limit_param

    def validate(
        self,
        context: dict[str, Any],
        config: dict[str, Any] | None,
        plugin_cls: Any,
        plugin_cfg: dict[str, Any] | None,
    ) -> None:
        value = _argument(plugin_cls, config, self.param_name)
        limit = _argument(plugin_cls, config, self.limit_param)
        try:
            too_big = value > limit
        except TypeError:
            return  # the "number" validators report non-numbers
        if too_big:
            self.fail(
                f"{self.param_name} is {value} which is greater than {self.limit_param} ({limit})"
            )


@validation.configure(name="keystone_bench_scope_for_method")
class ScopeForMethod(validation.Validator):
    """Checks that the scope can be asked for with the authentication method.

    An application credential carries its own project scope; Keystone
    refuses any scope sent with it.
    """

    def validate(
        self,
        context: dict[str, Any],
        config: dict[str, Any] | None,
        plugin_cls: Any,
        plugin_cfg: dict[str, Any] | None,
    ) -> None:
        method = _argument(plugin_cls, config, "method")
        scope = _argument(plugin_cls, config, "scope")
        if method == "application_credential" and scope != "project":
            self.fail(
                f"scope is {scope} but method application_credential only "
                "gives project-scoped tokens: use scope: project"
            )
