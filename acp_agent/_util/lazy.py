"""Public names whose module is imported on first use (a module ``__getattr__``, PEP 562).

A stdio agent that only talks never loads elicitation, permissions, tool calls, the v1
translation or the rarely used schema modules, yet every public name stays where it was
(``tests/unit/test_exports.py`` pins both).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes", "lazy_dir"]


def lazy_attributes(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name in ``modules`` is imported from the submodule
    it maps to the first time it is asked for, then kept in the package; any other is an
    ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # __import__ rather than importlib.import_module: only the former shows in ``python -X importtime``
        value = getattr(__import__(f"{package}.{module}", fromlist=[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


def lazy_dir(package: str, modules: Mapping[str, str]) -> Callable[[], list[str]]:
    """The module ``__dir__`` of ``package``: its loaded names and the names in ``modules`` not loaded yet
    (so ``dir()`` and tab completion list every public name)."""

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(modules))

    return __dir__
