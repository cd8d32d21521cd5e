"""Lazy where it pays, behind one boundary: what loads on first use, and the one written list of why.

A package writes each lazily loaded name once, as an ordinary import in its one top-level ``if TYPE_CHECKING:``
block. Type checkers and readers see a plain import; at run time the block does not run, and the first name asked
for that the package lacks makes `lazy_attributes` read that block from the package's own source (`lazy_map`: the
block alone is parsed, once) and import the submodule it names. Nothing process-wide is touched: no import hook, no
``builtins`` change, no annotation edited. A stdio agent that only talks never loads elicitation, permissions, tool
calls, the v1 translation or the rarely used schema modules, yet every public name stays where it was
(``tests/unit/test_exports.py`` pins both).

The boundary, one rule for the whole library:

- **A lazily loaded public name** is reached through its package's lazy map: ``schema.PlanEntry`` (module
  attribute) or ``from ..schema import PlanEntry`` at module level under ``if TYPE_CHECKING:`` for the annotation.
  A route's params given by name (``Method(handler, "NewSessionRequest")`` in ``_wire/connection.py``) is the
  same boundary: the connection resolves the name as ``getattr(acp_agent.schema, name)`` on first use, through
  ``schema``'s lazy map (a test checks each such name is in ``schema.__all__``).
- **An internal module deferred past start-up** (not a public name: a forwarder's engine, the history, the
  watchdog) is imported inside the function that needs it, and only a module listed in `DEFERRED`, which says
  which stage must not load it. Its types come from the module's ``if TYPE_CHECKING:`` block, so ``mypy`` checks
  every call. Any other import of our own modules is at module level.
- **An outside module** is imported inside a function only if `DEFERRED_OUTSIDE` lists it: an optional extra, an
  OS-only module, or a heavy one used on one path.
- The command line (``acp_agent/cli/``) imports the chosen command's module after parsing.

``tests/unit/test_exports.py`` walks every module's syntax tree and holds each function-level import to this rule.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterable, Mapping
from types import FunctionType
from typing import Any, Final

__all__ = ["DEFERRED", "DEFERRED_OUTSIDE", "lazy_attributes", "lazy_dir", "lazy_map", "public_module", "publish"]

DEFERRED: Final[Mapping[str, str]] = {
    # with the first session (the warm-up after ``initialize`` loads them while the client is quiet)
    "acp_agent.history": "the first session: the history needs the session-update models",
    "acp_agent._session.core": "the first session: the session engine and its turn, sink and registry parts",
    # features a talking agent never uses (tests/unit/test_exports.py: LAZY_FOR_A_TALKING_AGENT)
    "acp_agent.questions": "the first permission request or elicitation",
    "acp_agent._session.suggestions": "the first prompt suggestion (unstable Preview feature)",
    "acp_agent._session.keys": "the first prompt with an idempotencyKey (Preview)",
    "acp_agent.telemetry": "telemetry on (Agent.telemetry set or OTEL_* export configured): its interface and setup",
    "acp_agent.tool_calls": "the first tool call",
    "acp_agent.terminals": "the first terminal",
    "acp_agent._util.watch": "the first terminal (or the warm-up's reaping): the watchdog and its ledger",
    "acp_agent._util.reaper": "the first terminal: what the watchdog runs",
    "acp_agent.v1.translator": "the first v1 client",
    "acp_agent.store.postgres": "a postgresql:// store only (the command line's start-up otherwise)",
    # an optional extra behind them (the package imports without it)
    "acp_agent.http.server": "uvicorn (the http extra): acp_agent.http's ASGI app works without it",
    "acp_agent.dev.web": "starlette (the inspector extra), when ``dev`` runs and its arguments are checked",
    "acp_agent.dev.link": "the inspector's agent link and the testing client, when ``dev`` runs (the inspector extra)",
    "acp_agent.testing.remote": "the inspector's remote link, when ``dev`` runs (httpx: the inspector extra)",
    "acp_agent.telemetry.otel": "OpenTelemetry (the otel extra), only when OTEL_* export is configured",
}
"""Our modules a function may import (and no other): each one, and which start-up stage must not load it."""

DEFERRED_OUTSIDE: Final[Mapping[str, str]] = {
    "uvloop": "optional extra (uvloop)",
    "psycopg": "optional extra (postgres)",
    "uvicorn": "optional extra (http)",
    "httpx": "optional extra (inspector): connect_remote",
    "httpx_ws": "optional extra (inspector): connect_remote over WebSocket",
    "pydantic_ai": "optional extra (pydantic-ai): its MCP toolsets",
    "fastmcp": "optional extra (pydantic-ai[mcp]): its MCP transports",
    "fcntl": "POSIX only (acp_agent._util.portable: file locks)",
    "resource": "POSIX only: run_http's socket budget from RLIMIT_NOFILE",
    "msvcrt": "Windows only (acp_agent._util.portable: file locks)",
    "psutil": "a dependency off Linux only: process trees and start times where /proc is not (portable, reaper)",
    "sqlite3": "heavy standard library: the SQLite store's connection only",
    "jsonrpcserver": "a dependency of about 70 ms (it loads jsonschema): a refused call only",
    "jsonschema": "heavy (jsonrpcserver's dependency): an elicitation's answer checked against its schema",
    "platformdirs": "a dependency of about 4 ms: the default store's folder only",
    "ctypes": "Linux's prctl only: serve marking itself non-dumpable",
    "opentelemetry": "optional extra (otel): the SDK and OTLP exporter, only when OTEL_* export is configured",
}
"""Outside modules a function may import (top-level package: why it is not imported at module level)."""

_BLOCK = "\nif TYPE_CHECKING:\n"


def lazy_map(source: str) -> dict[str, str]:
    """``{name: submodule}`` from the first top-level ``if TYPE_CHECKING:`` block of a package's source, whose
    lines are all ``from .submodule import Name`` (no renames): the names the package loads on first use."""
    start = source.find(_BLOCK)
    if start < 0:
        return {}
    lines = source[start + 1:].splitlines()
    end = next((i for i, line in enumerate(lines[1:], 1) if line and not line[0].isspace() and line[0] != "#"),
               len(lines))
    modules: dict[str, str] = {}
    block = ast.parse("\n".join(lines[:end])).body[0]
    assert isinstance(block, ast.If)
    for node in block.body:
        if not isinstance(node, ast.ImportFrom) or node.level != 1 or not node.module:
            raise ImportError(f"the TYPE_CHECKING block of a lazy package holds 'from .module import Name' only, "
                              f"not {ast.unparse(node)!r}")
        for alias in node.names:
            if alias.asname is not None:
                raise ImportError(f"the TYPE_CHECKING block of a lazy package renames nothing ({alias.name!r})")
            modules[alias.name] = node.module
    return modules


def _read_map(package: str) -> dict[str, str]:
    """The lazy map of a loaded package, from its ``__init__.py``."""
    path = getattr(sys.modules[package], "__file__", None)
    if path is None:
        return {}
    with open(path, encoding="utf-8") as file:
        return lazy_map(file.read())


def _exporters(package: str) -> list[tuple[str, frozenset[str]]]:
    """The packages above ``package`` (top one first) that are loaded, with the names they export."""
    parts = package.split(".")
    found = []
    for end in range(1, len(parts)):
        candidate = ".".join(parts[:end])
        exported = getattr(sys.modules.get(candidate), "__all__", None)
        if exported:
            found.append((candidate, frozenset(exported)))
    return found


def public_module(package: str, name: str, exporters: list[tuple[str, frozenset[str]]] | None = None) -> str:
    """The shortest package, from the top one down to ``package``, whose ``__all__`` lists ``name``."""
    for candidate, exported in _exporters(package) if exporters is None else exporters:
        if name in exported:
            return candidate
    return package


def _publish_one(package: str, name: str, value: Any,
                 exporters: list[tuple[str, frozenset[str]]] | None = None) -> None:
    if not isinstance(value, (type, FunctionType)) or not value.__module__.startswith(package.partition(".")[0] + "."):
        return
    # typing.get_type_hints and pydantic resolve a class's string annotations in sys.modules[cls.__module__]: a class
    # that wrote any (``from __future__ import annotations``) keeps the module that can resolve them. A function's
    # hints resolve in its __globals__, whatever its __module__ says.
    annotations = vars(value).get("__annotations__", {}) if isinstance(value, type) else {}
    if any(isinstance(hint, str) for hint in annotations.values()):
        return
    value.__module__ = public_module(package, name, exporters)


def publish(package: str, names: Iterable[str]) -> None:
    """Set ``__module__`` of the classes and functions ``package`` exports (and has loaded) to their public path,
    as httpx does: ``acp_agent.run_stdio``, not ``acp_agent.stdio.run_stdio`` -- a plain attribute set, nothing else
    changed. Names still to load are set when they load (`lazy_attributes`); constants, type aliases and classes
    with string annotations keep theirs."""
    namespace = vars(sys.modules[package])
    exporters = _exporters(package)
    for name in names:
        if name in namespace:
            _publish_one(package, name, namespace[name], exporters)


def lazy_attributes(package: str, moved: Callable[[str, str], Any] | None = None) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name its ``if TYPE_CHECKING:`` block imports (`lazy_map`) is
    imported from that submodule the first time it is asked for, then kept in the package with its public
    ``__module__``; ``moved(package, name)`` may answer a name that is not (an old submodule path), ``None`` if it
    does not know it; any other is an ``AttributeError``."""
    read: dict[str, str] | None = None

    def __getattr__(name: str) -> Any:
        nonlocal read
        if read is None:
            read = _read_map(package)
        module = read.get(name)
        if module is None:
            old = None if moved is None else moved(package, name)
            if old is not None:
                return old
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # __import__ rather than importlib.import_module: only the former shows in ``python -X importtime``
        value = getattr(__import__(f"{package}.{module}", fromlist=[name]), name)
        _publish_one(package, name, value)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


def lazy_dir(package: str) -> Callable[[], list[str]]:
    """The module ``__dir__`` of ``package``: its loaded names and the lazily loaded ones not loaded yet (so ``dir()``
    and tab completion list every public name)."""

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(_read_map(package)))

    return __dir__
