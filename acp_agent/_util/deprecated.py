"""Old module paths that still import, for one release, with a ``DeprecationWarning`` naming a public home.

`MOVED` is the one table: for each old path, the module it now is and the advice its warning gives (the
public names that replace it, or that it had none; never a private module, which users must not import).
`install` puts a finder on ``sys.meta_path`` that answers only for those names: importing one imports the
new module and makes the old name the very same module object, so ``from acp_agent.core import SessionCore``
is ``acp_agent._session.core.SessionCore``. Nothing is imported until an old path is used
(the spec class comes from the already loaded ``importlib`` bootstrap).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Final, NamedTuple

__all__ = ["MOVED", "Moved", "attribute", "install", "parameter", "warning"]

_INTERNAL = "it had no public names (internal; nothing to replace)"


class Moved(NamedTuple):
    """Where an old module path went: the module it now is, and the advice its warning gives."""

    new: str
    """The module that replaced it (often internal: the alias is that very module object)."""
    advice: str
    """What the warning tells the user: the public home of the module's public names, or that it had none."""


MOVED: Final = {
    "acp_agent.ids": Moved("acp_agent._util.ids", _INTERNAL),
    "acp_agent.lazy": Moved("acp_agent._util.lazy", _INTERNAL),
    "acp_agent.eventloop": Moved("acp_agent._util.eventloop",
                                 _INTERNAL + "; ACP_AGENT_BACKEND and ACP_AGENT_UVLOOP still choose the event loop"),
    "acp_agent.loop_monitor": Moved("acp_agent._util.loop_monitor",
                                    "use acp_agent.testing.monitor_event_loop (its other names were internal)"),
    "acp_agent.processes": Moved("acp_agent._util.processes",
                                 "use acp_agent.ExitStatus (its other names were internal)"),
    "acp_agent.framing": Moved("acp_agent._wire.framing", _INTERNAL),
    "acp_agent.connection": Moved("acp_agent._wire.connection", _INTERNAL),
    "acp_agent.core": Moved("acp_agent._session.core", "use acp_agent.Session (SessionCore was its internal engine)"),
    "acp_agent.turns": Moved("acp_agent._session.turns", "use acp_agent.StopReason (its other names were internal)"),
    "acp_agent.state": Moved("acp_agent._session.snapshots", _INTERNAL),
    "acp_agent.sink": Moved("acp_agent._session.sink", _INTERNAL),
    "acp_agent.background": Moved("acp_agent._session.registry", "use acp_agent.BackgroundRegistry and "
                                  "acp_agent.ToolCallStateError (its other names were internal)"),
    "acp_agent.asks": Moved("acp_agent._session.asking", _INTERNAL),
    "acp_agent.runtime": Moved("acp_agent._runtime.runtime", _INTERNAL + "; to serve an agent use acp_agent.serve"),
    "acp_agent.bookkeeping": Moved("acp_agent._runtime.bookkeeping", _INTERNAL),
    "acp_agent.directory": Moved("acp_agent._runtime.live", _INTERNAL),
    "acp_agent.warmup": Moved("acp_agent._runtime.warmup", _INTERNAL),
    "acp_agent.permissions": Moved("acp_agent.questions", "use acp_agent.PermissionOutcome and "
                                   "acp_agent.Session.request_permission (its other names were internal)"),
    "acp_agent.elicitation": Moved("acp_agent.questions", "use acp_agent.ElicitationResult, "
                                   "acp_agent.ElicitationUnsupportedError, acp_agent.Session.ask, "
                                   "acp_agent.Session.ask_url and acp_agent.Session.complete_elicitation "
                                   "(its other names were internal)"),
}
"""Old module path -> where it went and what its warning advises (never a private module: see the tests)."""


def parameter(call: str, name: str, advice: str, *, removed_in: str = "0.3.0") -> None:
    """Warn, from the caller's caller's line, that ``call``'s parameter ``name`` is deprecated; ``advice`` says
    what to write instead."""
    warnings.warn(f"{call}({name}=...) is deprecated and will be removed in {removed_in}: {advice}",
                  DeprecationWarning, stacklevel=3)


def warning(old: str) -> str:
    """The warning for the old module path ``old``: deprecated, and where its public names live now."""
    return f"{old} is deprecated and will be removed in the next release; {MOVED[old].advice}"


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
        new = MOVED[spec.name].new
        warnings.warn(warning(spec.name), DeprecationWarning, stacklevel=2)
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
