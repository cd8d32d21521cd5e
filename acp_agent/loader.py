"""The agent a command line names (``FILE_OR_MODULE[:ATTR]``), and the store, tokens and cookie ``serve`` reads.

`load_agent` finds the one [`Agent`][acp_agent.Agent] subclass or instance in a Python file or module (or the
one named after the colon); `parse_store` turns ``--store`` into a session store; `load_tokens` reads a
``--tokens`` file; `affinity_header` turns ``--affinity-cookie`` into a header. Each refuses with `LoadError`,
whose message says why in one line. The commands that
run an agent (``serve``, ``stdio``, ``dev``) use it; so may a test. Nothing here imports a transport.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from .agent import Agent
from .store import MemoryStore, SessionStore, SqliteStore

__all__ = ["AgentSource", "LoadError", "affinity_header", "load_agent", "load_tokens", "parse_store"]

AgentSource = Agent | Callable[[], Agent]
"""An agent instance (shared by every connection) or a class (one instance per connection)."""


class LoadError(Exception):
    """The agent, store or tokens file could not be found or loaded; the message says why."""


def _load_module(target: str) -> ModuleType:
    path = Path(target)
    if target.endswith(".py") or path.is_file():
        if not path.is_file():
            raise LoadError(f"no such file: {target}")
        resolved = path.resolve()
        sys.path.insert(0, str(resolved.parent))
        name = f"_acp_served_{resolved.stem}"
        spec = importlib.util.spec_from_file_location(name, resolved)
        if spec is None or spec.loader is None:
            raise LoadError(f"cannot load {target} as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name and target.startswith(exc.name):
            raise LoadError(f"no such file or module: {target}") from None
        raise
def load_agent(spec: str) -> tuple[AgentSource, str]:
    """The agent named by ``FILE_OR_MODULE[:ATTR]`` and a short description of it.

    Without ``ATTR``: the one [`Agent`][acp_agent.Agent] instance at module level, else the one subclass
    defined there; anything else is an error naming the candidates.
    """
    target, _, attr = spec.rpartition(":") if ":" in spec.replace("\\", "/").split("/")[-1] else (spec, "", "")
    module = _load_module(target or spec)
    if attr:
        try:
            found: Any = getattr(module, attr)
        except AttributeError:
            raise LoadError(f"{target} has no attribute {attr!r}") from None
        if isinstance(found, Agent):
            return found, f"{attr} ({type(found).__name__} instance)"
        if isinstance(found, type) and issubclass(found, Agent):
            return found, attr
        raise LoadError(f"{target}:{attr} is neither an Agent subclass nor an Agent instance")
    instances = {name: value for name, value in vars(module).items() if isinstance(value, Agent)}
    classes = {
        name: value for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, Agent) and value is not Agent
        and value.__module__ == module.__name__
    }
    if len(instances) == 1:
        name, instance = next(iter(instances.items()))
        return instance, f"{name} ({type(instance).__name__} instance)"
    if not instances and len(classes) == 1:
        name, cls = next(iter(classes.items()))
        return cls, name
    candidates = sorted(instances) if instances else sorted(classes)
    if not candidates:
        raise LoadError(f"{target or spec} defines no Agent subclass or instance")
    raise LoadError(f"{target or spec} holds several agents ({', '.join(candidates)}); name one as "
                    f"{target or spec}:NAME")



def parse_store(spec: str) -> SessionStore:
    """The store named by ``sqlite:PATH``, ``postgres:DSN`` (or a ``postgresql://`` URL) or ``memory``."""
    kind, _, rest = spec.partition(":")
    if spec == "memory":
        return MemoryStore()
    if kind == "sqlite" and rest:
        return SqliteStore(Path(rest).expanduser())
    if spec.startswith(("postgresql://", "postgres://")):
        rest, kind = spec, "postgres"
    if kind in ("postgres", "postgresql") and rest:
        try:
            from .store.postgres import PostgresStore
        except ImportError as exc:  # pragma: no cover - the module itself imports nothing optional
            raise LoadError(f"the postgres store needs the postgres extra ({exc})") from None
        return PostgresStore(rest)
    raise LoadError(f"unknown store {spec!r}: use sqlite:PATH, postgres:DSN or memory")


def load_tokens(path: str) -> dict[str, str]:
    """The principals and their tokens in a ``--tokens`` file: ``principal:token`` lines, blank lines and
    ``#`` comments ignored. Refused (`LoadError`, saying why) when the file is readable or writable by
    group or others, a line is malformed, or a principal or a token repeats."""
    try:
        mode = os.stat(path).st_mode
        with open(path, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise LoadError(f"cannot read the tokens file {path}: {exc}") from None
    if mode & 0o077:
        raise LoadError(f"the tokens file {path} is accessible to group or others (mode {mode & 0o777:04o}); "
                        f"run: chmod 600 {path}")
    tokens: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        principal, sep, token = line.partition(":")
        principal, token = principal.strip(), token.strip()
        if not sep or not principal or not token:
            raise LoadError(f"{path}:{number}: expected 'principal:token'")
        if principal in tokens:
            raise LoadError(f"{path}:{number}: principal {principal!r} appears twice")
        if token in tokens.values():
            raise LoadError(f"{path}:{number}: the token of {principal!r} is another principal's too")
        tokens[principal] = token
    if not tokens:
        raise LoadError(f"the tokens file {path} names no principal")
    return tokens


def affinity_header(spec: str) -> tuple[str, str]:
    """The ``Set-Cookie`` header of ``--affinity-cookie NAME=VALUE``."""
    name, sep, value = spec.partition("=")
    if not sep or not name or any(c in spec for c in ";, \t\r\n"):
        raise LoadError(f"--affinity-cookie wants NAME=VALUE (no spaces, commas or semicolons), got {spec!r}")
    return "Set-Cookie", f"{name}={value}; Path=/; HttpOnly"
