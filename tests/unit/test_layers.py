"""The shape of the house: no import cycle among acp_agent's modules, the import-layers contract holds and bites,
and no room grows too big.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``, run by ``make test`` as ``lint-imports``).
The cycle finder here is independent of it: it reads every module with :mod:`ast` and counts every import,
at module level, inside functions and under ``TYPE_CHECKING``, relative or absolute, and ``from . import x``
as an import of the module ``x`` when ``x`` is one.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "acp_agent"

KNOWN_CYCLES: list[frozenset[str]] = []  # none: a cycle added to the tree fails test_no_import_cycle_anywhere

KNOWN_BIG_MODULES: set[str] = set()  # none: every library module stays under MAX_LINES

MAX_LINES = 1000
MAX_TOP_LEVEL_MODULES = 20


def module_files(package: Path) -> dict[str, tuple[Path, bool]]:
    """Every module under ``package``: dotted name -> (file, whether it is a package's ``__init__``)."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    """Which of the package's modules each of them imports (every import statement anywhere in the file)."""
    modules = module_files(package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        here = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                graph[name].update(_known(modules, (alias.name for alias in node.names)))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    target = ".".join([*base, node.module] if node.module else base)
                else:
                    target = node.module or ""
                for alias in node.names:
                    submodule = f"{target}.{alias.name}"
                    if submodule in modules:
                        graph[name].add(submodule)  # ``from . import x``: the module x
                    elif target in modules:
                        graph[name].add(target)  # a name defined in ``target``
        graph[name].discard(name)
    return graph


def _known(modules: dict[str, tuple[Path, bool]], names: Iterable[str]) -> set[str]:
    """The modules ``import a.b.c`` names: the deepest one of ours (importing runs its parents too, but the
    parents' own imports are theirs)."""
    found = set()
    for dotted in names:
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in modules:
                found.add(".".join(parts[:end]))
                break
    return found


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected groups of more than one module (each holds at least one cycle), Tarjan's way."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(start: str) -> None:
        # Iterative, so a long chain never meets the recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(frozenset(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def lint_imports(config: Path, path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``lint-imports`` on the config file ``config`` with ``path`` first on ``sys.path``."""
    script = Path(sys.executable).with_name("lint-imports")
    command = [str(script)] if script.exists() else [shutil.which("lint-imports") or "lint-imports"]
    env = {**os.environ, "PYTHONPATH": str(path)}
    return subprocess.run([*command, "--no-cache", str(config)], cwd=path, env=env, capture_output=True,
                          text=True, timeout=120)


def copy_package(tmp_path: Path) -> Path:
    """A copy of acp_agent and pyproject.toml (its contracts) under ``tmp_path``; the copy's package folder."""
    shutil.copytree(PACKAGE, tmp_path / "acp_agent", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path / "acp_agent"


def append(path: Path, code: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + code, encoding="utf-8")


# -- the tree as it is -----------------------------------------------------------------------------


def test_no_import_cycle() -> None:
    found = cycles(import_graph(PACKAGE))
    assert sorted(map(sorted, set(found) - set(KNOWN_CYCLES))) == []


def test_the_finder_counts_every_kind_of_import() -> None:
    graph = import_graph(PACKAGE)
    assert "acp_agent._runtime.runtime" in graph["acp_agent._runtime.serve"]  # from .runtime import ...
    assert "acp_agent.schema" in graph["acp_agent._runtime.runtime"]  # from .. import schema
    assert "acp_agent._session.core" in graph["acp_agent._runtime.runtime"]  # under TYPE_CHECKING
    assert "acp_agent.http" in graph["acp_agent.cli.serve"]  # inside a function


def test_the_contract_holds() -> None:
    result = lint_imports(ROOT / "pyproject.toml", ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " broken" in result.stdout and "0 broken" in result.stdout


def test_type_checking_imports_are_counted() -> None:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    assert config["root_package"] == "acp_agent"
    assert config.get("exclude_type_checking_imports", False) is False


# -- a back-import is caught -----------------------------------------------------------------------


@pytest.mark.parametrize(("module", "code", "importer", "imported"), [
    # A session engine reaching up for a façade, inside a function.
    ("_session/core.py", "def _back() -> None:\n    from acp_agent.session import Session  # noqa: F401\n",
     "acp_agent._session.core", "acp_agent.session"),
    # A leaf helper reaching up for the agent, under TYPE_CHECKING and relative.
    ("_util/ids.py", "import typing\n\nif typing.TYPE_CHECKING:\n    from ..agent import Agent  # noqa: F401\n",
     "acp_agent._util.ids", "acp_agent.agent"),
    # The store reaching for the runtime (what the live-session directory used to be).
    ("store/base.py", "from .._runtime import live  # noqa: F401\n", "acp_agent.store.base", "acp_agent._runtime.live"),
    # HTTP importing the stdio transport.
    ("http/connections.py", "from ..stdio import FdSendStream  # noqa: F401\n",
     "acp_agent.http.connections", "acp_agent.stdio"),
])
def test_a_back_import_breaks_the_contract_and_makes_a_cycle(tmp_path: Path, module: str, code: str, importer: str,
                                                            imported: str) -> None:
    copy = copy_package(tmp_path)
    append(copy / module, code)
    result = lint_imports(tmp_path / "pyproject.toml", tmp_path)
    assert result.returncode != 0, result.stdout
    assert "BROKEN" in result.stdout and importer in result.stdout and imported in result.stdout, result.stdout
    graph = import_graph(copy)
    assert imported in graph[importer]
    if importer != "acp_agent.http.connections":  # nothing below stdio imports http: a violation, not a cycle
        added = [group for group in cycles(graph) if group not in KNOWN_CYCLES]
        assert any({importer, imported} <= group for group in added), added


def test_the_finder_reports_a_cycle_it_is_shown() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]


# -- sizes -----------------------------------------------------------------------------------------


def test_no_library_module_is_over_a_thousand_lines() -> None:
    over = {}
    for path in PACKAGE.rglob("*.py"):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        name = path.relative_to(ROOT).as_posix()
        if lines > MAX_LINES and name not in KNOWN_BIG_MODULES:
            over[name] = lines
    assert over == {}


def test_at_most_twenty_top_level_modules() -> None:
    """The files of ``acp_agent/`` itself, ``__init__.py`` and ``__main__.py`` included (packages are rooms
    of their own and not counted)."""
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
