"""Public names whose module is imported on first use (a module ``__getattr__``, PEP 562), and public ``__module__``.

A package writes each lazily loaded name once, as an ordinary import inside ``with LazyImports(globals()) as
lazy:``. Type checkers and readers see a plain import; at run time the block binds nothing and only records
which submodule each name comes from, which `lazy_attributes` then imports on first use. The recording
costs a swap of ``builtins.__import__`` for the block (no source parsing, no extra module). A stdio agent that
only talks never loads elicitation, permissions, tool calls, the v1 translation or the rarely used schema
modules, yet every public name stays where it was (``tests/unit/test_exports.py`` pins both).
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import FunctionType, TracebackType
from typing import Any, ForwardRef

__all__ = ["LazyImports", "lazy_attributes", "lazy_dir", "public_module", "publish"]


class _Unbound:
    """What a recorded ``from .x import name`` binds until the block ends (then the name is removed)."""

    def __getattr__(self, name: str) -> _Unbound:
        return self


_UNBOUND = _Unbound()


class LazyImports:
    """``with LazyImports(globals()) as lazy:`` around ``from .module import Name`` lines: records
    ``lazy.modules[Name] = module`` and imports nothing. Only imports made by the package's own module body
    are recorded (other threads import as usual); ``import x``, ``as`` renames and absolute imports are
    refused."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self._namespace = namespace
        self._import: Callable[..., Any] = builtins.__import__
        self.modules: dict[str, str] = {}

    def _record(self, name: str, globals: Mapping[str, Any] | None = None, locals: Mapping[str, Any] | None = None,
                fromlist: Sequence[str] | None = (), level: int = 0) -> Any:
        if globals is not self._namespace:
            return self._import(name, globals, locals, fromlist, level)
        if level != 1 or not name or not fromlist:
            raise ImportError(f"LazyImports records 'from .module import Name' only, not {name!r} (level {level})")
        for attribute in fromlist:
            self.modules[attribute] = name
        return _UNBOUND

    def __enter__(self) -> LazyImports:
        builtins.__import__ = self._record
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        builtins.__import__ = self._import
        for name in self.modules:
            if self._namespace.get(name) is _UNBOUND:
                del self._namespace[name]
            else:
                raise ImportError(f"{name!r} was imported under another name in a LazyImports block")


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


def _forward_ref(hint: str, module: str) -> ForwardRef:
    """``ForwardRef(hint, module=module)`` for a class annotation: it resolves in the module that wrote it, whatever
    the class's ``__module__`` says (about 12 us each; some 50 of them at import)."""
    return ForwardRef(hint, module=module, is_class=True)


def _publish_one(package: str, name: str, value: Any,
                 exporters: list[tuple[str, frozenset[str]]] | None = None) -> None:
    if not isinstance(value, (type, FunctionType)) or not value.__module__.startswith(package.partition(".")[0] + "."):
        return
    if isinstance(value, type):
        # typing.get_type_hints (and pydantic's deferred build) read a class's string annotations in the globals of
        # sys.modules[cls.__module__]: a ForwardRef that names the defining module keeps them resolving there.
        annotations = value.__dict__.get("__annotations__")  # noqa: RUF063 (changed in place, not a copy)
        if annotations:
            for key, hint in annotations.items():
                if isinstance(hint, str):
                    annotations[key] = _forward_ref(hint, value.__module__)
    value.__module__ = public_module(package, name, exporters)


def publish(package: str, names: Iterable[str]) -> None:
    """Set ``__module__`` of the classes and functions ``package`` exports (and has loaded) to their public path,
    as httpx does: ``acp_agent.Session``, not ``acp_agent.session.Session``. Names still to load are set when
    they load (`lazy_attributes`); constants and type aliases keep theirs."""
    namespace = vars(sys.modules[package])
    exporters = _exporters(package)
    for name in names:
        if name in namespace:
            _publish_one(package, name, namespace[name], exporters)


def lazy_attributes(package: str, modules: Mapping[str, str],
                    moved: Callable[[str, str], Any] | None = None) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name in ``modules`` is imported from the submodule
    it maps to the first time it is asked for, then kept in the package with its public ``__module__``;
    ``moved(package, name)`` may answer a name that is not (an old submodule path), ``None`` if it does not
    know it; any other is an ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
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


def lazy_dir(package: str, modules: Mapping[str, str]) -> Callable[[], list[str]]:
    """The module ``__dir__`` of ``package``: its loaded names and the names in ``modules`` not loaded yet
    (so ``dir()`` and tab completion list every public name)."""

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(modules))

    return __dir__
