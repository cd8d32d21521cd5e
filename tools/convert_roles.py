"""Rewrite the Sphinx roles in acp_agent's docstrings as mkdocstrings cross-references.

``:class:`~acp_agent.store.MemoryStore` `` becomes ``[`MemoryStore`][acp_agent.store.MemoryStore]`` when the
target is rendered on the site (a public name of a module the Reference documents, or a member of one), and
plain code (`` `MemoryStore` ``) otherwise, so ``mkdocs build --strict`` finds every cross-reference it is
given. Names are resolved as Python would see them from the docstring's place: the enclosing classes, the
module's globals, then the public modules. Only docstrings change (string statements: module, class,
function and attribute docstrings); a file without roles is left byte for byte, so running it again after a
merge converts only what the merge brought in.

    python tools/convert_roles.py            # rewrite acp_agent/ in place
    python tools/convert_roles.py --check    # exit 1 (listing them) if any role is left
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib
import inspect
import re
import sys
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "acp_agent"

# The modules the Reference pages render (docs/reference/*.md), most public first: a name exported by several
# is linked where it is documented first.
PUBLIC_MODULES = (
    "acp_agent",
    "acp_agent.testing",
    "acp_agent.http",
    "acp_agent.store",
    "acp_agent.store.postgres",
    "acp_agent.schema",
)

ROLE = re.compile(r":(?:py:)?(?P<role>class|meth|func|attr|mod|data|exc|obj):`(?P<body>[^`]+)`")
EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)

_MISSING = object()


@dataclass(frozen=True)
class Found:
    """What a role's target names: the object, and the class it was read from for a member."""

    obj: Any
    owner: type | None = None
    member: str = ""
    module: types.ModuleType | None = None  # for data: the module the name was read from


def _public_names() -> tuple[dict[int, str], dict[str, tuple[str, Any]]]:
    """Public path of each documented class, function and module (by id), and of each documented data name."""
    by_id: dict[int, str] = {}
    data: dict[str, tuple[str, Any]] = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        by_id.setdefault(id(module), module_name)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            path = f"{module_name}.{name}"
            if inspect.isclass(value) or inspect.isroutine(value) or inspect.ismodule(value):
                by_id.setdefault(id(value), path)
            else:
                data.setdefault(name, (path, value))
    return by_id, data


def _import_chain(dotted: str) -> Any:
    """``a.b.C.d``: import the longest importable module prefix, then read the rest as attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part, _MISSING)
            if obj is _MISSING:
                return _MISSING
        return obj
    return _MISSING


def _has_member(cls: type, name: str) -> bool:
    for klass in cls.__mro__:
        if name in vars(klass) or name in getattr(klass, "__annotations__", {}):
            return True
    fields = getattr(cls, "model_fields", None) or getattr(cls, "__dataclass_fields__", None) or {}
    return name in fields or _assigned_on_self(cls, name)


def _assigned_on_self(cls: type, name: str) -> bool:
    """An instance attribute: ``self.name = ...`` (or ``self.name: T = ...``) in a method of the class."""
    pattern = re.compile(rf"\bself\.{re.escape(name)}\s*(?::[^=\n]+)?=[^=]")
    for klass in cls.__mro__:
        for value in vars(klass).values():
            if inspect.isfunction(value):  # a function knows its file even when __module__ is the public one
                try:
                    if pattern.search(inspect.getsource(value)):
                        return True
                except (OSError, TypeError):
                    continue
    return False


def _walk(start: Any, parts: list[str], module: types.ModuleType | None) -> Found | None:
    """Read ``parts`` as attributes from ``start``; the last step of a class is a member of it."""
    obj = start
    for index, part in enumerate(parts):
        if inspect.isclass(obj) and index == len(parts) - 1:
            if _has_member(obj, part):
                return Found(getattr(obj, part, None), owner=obj, member=part)
            return None
        if inspect.ismodule(obj):
            module = obj
        nxt = getattr(obj, part, _MISSING)
        if nxt is _MISSING:
            return None
        obj = nxt
    return Found(obj, module=module if not (inspect.isclass(obj) or inspect.isroutine(obj)) else None)


def resolve(target: str, module: types.ModuleType, classes: list[type]) -> Found | None:
    """The object ``target`` names, seen from a docstring in ``module`` inside ``classes`` (innermost last)."""
    target = target.strip().lstrip(".").removesuffix("()")
    parts = target.split(".")
    for cls in reversed(classes):  # `save` inside a class: a method of that class
        found = _walk(cls, parts, None)
        if found:
            return found
    found = _walk(module, parts, module)
    if found:
        return found
    for public in PUBLIC_MODULES:
        found = _walk(importlib.import_module(public), parts, None)
        if found:
            return found
    if target.startswith("acp_agent."):
        obj = _import_chain(target)
        if obj is not _MISSING:
            return Found(obj)
        head, _, member = target.rpartition(".")
        owner = _import_chain(head)
        if inspect.isclass(owner) and _has_member(owner, member):
            return Found(None, owner=owner, member=member)
    if hasattr(builtins, parts[0]):
        return Found(getattr(builtins, parts[0]))
    obj = _import_chain(target)
    return None if obj is _MISSING else Found(obj)


def public_path(found: Found, by_id: dict[int, str], data: dict[str, tuple[str, Any]]) -> str | None:
    """Where ``found`` is rendered on the site, or ``None`` when the Reference does not show it."""
    if found.owner is not None:
        for klass in found.owner.__mro__:  # linked where it is defined, if that class is documented
            if found.member in vars(klass) and id(klass) in by_id:
                return f"{by_id[id(klass)]}.{found.member}"
        if id(found.owner) in by_id:  # else on the documented subclass (rendered with its inherited members)
            return f"{by_id[id(found.owner)]}.{found.member}"
        return None
    obj = found.obj
    if inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj):
        return by_id.get(id(obj))
    for path, value in data.values():
        if value is obj and found.module is not None and path.rpartition(".")[0] in PUBLIC_MODULES:
            return path
    return None


def _docstring_nodes(tree: ast.Module) -> Iterator[tuple[ast.Constant, list[str]]]:
    """Every string statement (a docstring of a module, class, function or attribute) with its class path."""

    def visit(body: list[ast.stmt], classes: list[str]) -> Iterator[tuple[ast.Constant, list[str]]]:
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(
                stmt.value.value, str
            ):
                yield stmt.value, classes
            elif isinstance(stmt, ast.ClassDef):
                yield from visit(stmt.body, [*classes, stmt.name])
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.If | ast.With | ast.Try):
                yield from visit(stmt.body, classes)

    yield from visit(tree.body, [])


def _offset(lines: list[str], lineno: int, col: int) -> int:
    """Character offset of (1-based line, UTF-8 byte column) in the joined text."""
    line = lines[lineno - 1]
    return sum(len(x) for x in lines[: lineno - 1]) + len(line.encode()[:col].decode())


def convert_text(text: str, module: types.ModuleType, classes: list[type], tables: Any, where: str) -> str:
    by_id, data = tables

    def replace(match: re.Match[str]) -> str:
        body = " ".join(match["body"].split())
        explicit = EXPLICIT.match(body)
        if explicit:
            shown, target = explicit["text"], explicit["target"]
        else:
            target = body
            shown = body.lstrip("~").rsplit(".", 1)[-1] if body.startswith("~") else body.lstrip(".")
        target = target.lstrip("~")
        found = resolve(target, module, classes)
        path = public_path(found, by_id, data) if found else None
        if found is None:
            print(f"{where}: unresolved {match[0]!r}: plain code", file=sys.stderr)
        return f"[`{shown}`][{path}]" if path else f"`{shown}`"

    return ROLE.sub(replace, text)


LIMIT = 120  # ruff's line-length (pyproject.toml)
_NOT_CONTINUED = re.compile(r"^(?:[-*] |\d+[.)] |>>>|\"\"\"|[A-Z][A-Za-z ]*:$)")


def rewrap(source: str) -> str:
    """Break the docstring lines a link made longer than ``LIMIT``, carrying words into the next line."""
    rows: set[int] = set()
    for node, _ in _docstring_nodes(ast.parse(source)):
        rows.update(range(node.lineno - 1, node.end_lineno or node.lineno))
    out: list[str] = []
    carry: tuple[int, str] | None = None  # words pushed out of the previous line, and their indentation
    for index, raw in enumerate(source.splitlines(keepends=True)):
        line = raw.rstrip("\n")
        merged = False
        if carry is not None:
            indent, words = carry
            carry = None
            body = line.strip()
            if (index in rows and '"""' not in words and body and len(line) - len(line.lstrip()) == indent
                    and not _NOT_CONTINUED.match(body)):
                line, merged = " " * indent + words + " " + body, True
            else:
                out.append(" " * indent + words + "\n")
        if index in rows and len(line) > LIMIT and (merged or "][" in line):
            indent = len(line) - len(line.lstrip())
            cut = line.rfind(" ", 0, LIMIT + 1)
            if cut > indent:
                more = indent + (2 if line.lstrip()[:2] in ("- ", "* ") else 0)
                line, carry = line[:cut].rstrip(), (more, line[cut + 1 :].strip())
        out.append(line + ("\n" if raw.endswith("\n") else ""))
    if carry is not None:
        out.append(" " * carry[0] + carry[1] + "\n")
    return "".join(out)


def convert_file(path: Path, tables: Any) -> bool:
    """Rewrite the roles of one file's docstrings; True if it changed."""
    source = path.read_text()
    if not ROLE.search(source):
        return False
    tree = ast.parse(source)
    relative = path.relative_to(ROOT).with_suffix("")
    module_name = ".".join(relative.parts).removesuffix(".__init__")
    module = importlib.import_module(module_name)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    for node, class_path in _docstring_nodes(tree):
        start = _offset(lines, node.lineno, node.col_offset)
        end = _offset(lines, node.end_lineno or node.lineno, node.end_col_offset or 0)
        segment = source[start:end]
        if not ROLE.search(segment):
            continue
        classes: list[type] = []
        owner: Any = module
        for name in class_path:
            owner = getattr(owner, name, None)
            if inspect.isclass(owner):
                classes.append(owner)
        edits.append((start, end, convert_text(segment, module, classes, tables, f"{path}:{node.lineno}")))
    for start, end, new in sorted(edits, reverse=True):
        source = source[:start] + new + source[end:]
    source = rewrap(source)
    ast.parse(source)  # the rewrite left valid Python
    path.write_text(source)
    return bool(edits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only list the roles left; exit 1 if any")
    parser.add_argument("paths", nargs="*", type=Path, help="files or folders (default: acp_agent/)")
    args = parser.parse_args(argv)
    files = sorted(
        f for p in (args.paths or [PACKAGE]) for f in ([p] if p.is_file() else p.rglob("*.py"))
    )
    if args.check:
        left = [(f, m.group(0)) for f in files for m in ROLE.finditer(f.read_text())]
        for f, role in left:
            print(f"{f}: {role}")
        return 1 if left else 0
    sys.path.insert(0, str(ROOT))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated aliases warn when read
        tables = _public_names()
        changed = [f for f in files if convert_file(f.resolve(), tables)]
    print(f"converted roles in {len(changed)} file(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
