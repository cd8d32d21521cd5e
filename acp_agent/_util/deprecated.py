"""Old module paths that still import, for one release, with a ``DeprecationWarning`` naming the new one.

`MOVED` is the one table. `install` puts a finder on ``sys.meta_path`` that answers only for those
names: importing one imports the new module and makes the old name the very same module object, so
``from acp_agent.core import SessionCore`` is ``acp_agent._session.core.SessionCore``. Nothing is imported
until an old path is used (the spec class comes from the already loaded ``importlib`` bootstrap).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Final

__all__ = ["MOVED", "attribute", "install", "parameter"]

MOVED: Final = {
    "acp_agent.ids": "acp_agent._util.ids",
    "acp_agent.lazy": "acp_agent._util.lazy",
    "acp_agent.eventloop": "acp_agent._util.eventloop",
    "acp_agent.loop_monitor": "acp_agent._util.loop_monitor",
    "acp_agent.processes": "acp_agent._util.processes",
    "acp_agent.framing": "acp_agent._wire.framing",
    "acp_agent.connection": "acp_agent._wire.connection",
    "acp_agent.core": "acp_agent._session.core",
    "acp_agent.turns": "acp_agent._session.turns",
    "acp_agent.state": "acp_agent._session.snapshots",
    "acp_agent.sink": "acp_agent._session.sink",
    "acp_agent.background": "acp_agent._session.registry",
    "acp_agent.asks": "acp_agent._session.asking",
    "acp_agent.runtime": "acp_agent._runtime.runtime",
    "acp_agent.bookkeeping": "acp_agent._runtime.bookkeeping",
    "acp_agent.directory": "acp_agent._runtime.live",
    "acp_agent.warmup": "acp_agent._runtime.warmup",
    "acp_agent.permissions": "acp_agent.questions",
    "acp_agent.elicitation": "acp_agent.questions",
}
"""Old module path -> the module that replaced it."""


def parameter(call: str, name: str, advice: str, *, removed_in: str = "0.3.0") -> None:
    """Warn, from the caller's caller's line, that ``call``'s parameter ``name`` is deprecated; ``advice`` says
    what to write instead."""
    warnings.warn(f"{call}({name}=...) is deprecated and will be removed in {removed_in}: {advice}",
                  DeprecationWarning, stacklevel=3)


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated and will be removed in the next release; use {new}",
                  DeprecationWarning, stacklevel=3)


class _Alias:
    """Finder and loader for the names in `MOVED` (duck-typed: ``importlib.abc`` costs start-up time)."""

    @classmethod
    def find_spec(cls, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> Any:
        if fullname not in MOVED:
            return None
        spec_class: Any = type(sys.modules[__name__].__spec__)  # importlib.machinery.ModuleSpec
        return spec_class(fullname, cls)

    @staticmethod
    def create_module(spec: Any) -> ModuleType:
        new = MOVED[spec.name]
        _warn(spec.name, new)
        __import__(new)
        module = sys.modules[new]
        spec.loader_state = module.__spec__  # the import system sets __spec__ to the alias's: exec_module undoes it
        return module

    @staticmethod
    def exec_module(module: ModuleType) -> None:
        """The new module is already executed: give it back its own spec."""
        spec: Any = module.__spec__
        module.__spec__ = spec.loader_state


def install() -> None:
    """Answer imports of the old paths (once per interpreter)."""
    if _Alias not in sys.meta_path:
        sys.meta_path.append(_Alias)


def attribute(package: str, name: str) -> ModuleType | None:
    """``package.name`` for an old submodule not imported yet (the package ``__getattr__``), warned, or ``None``."""
    if f"{package}.{name}" not in MOVED:
        return None
    __import__(f"{package}.{name}")
    return sys.modules[f"{package}.{name}"]
