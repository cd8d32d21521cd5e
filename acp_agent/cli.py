"""The command line: ``python -m acp_agent serve FILE_OR_MODULE[:ATTR] --host H --port P``.

``serve`` loads the agent (the one [`Agent`][acp_agent.Agent] subclass or instance in the file or
module, or the one named after the colon) and serves it over Streamable HTTP and WebSocket at
``/acp``. Once it listens it writes the URL to stderr (``--port 0`` picks a free port). A class
gets a new instance for every client connection; an instance is shared by all of them. Every
connection keeps its sessions in one store (``--store``), so clients resume them on a new
connection, and replicas sharing a ``postgres:`` store resume each other's.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from ._util import environment
from .agent import Agent
from .store import MemoryStore, SessionStore, SqliteStore

__all__ = ["AgentSource", "affinity_header", "load_agent", "load_tokens", "main", "parse_store"]

AgentSource = Agent | Callable[[], Agent]
"""An agent instance (shared by every connection) or a class (one instance per connection)."""


class LoadError(Exception):
    """The agent could not be found or loaded; the message says why."""


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m acp_agent", description="acp-agent command line")
    commands = parser.add_subparsers(dest="command", required=True)
    # Listed here for --help only: ``python -m acp_agent dev`` is dispatched before this parser (acp_agent.__main__).
    commands.add_parser("dev", add_help=False,
                        help="open the inspector in the browser (the inspector extra; see: dev --help)")
    serve = commands.add_parser(
        "serve", help="serve an agent over Streamable HTTP and WebSocket",
        description="Serve the agent in FILE_OR_MODULE over ACP's Streamable HTTP and WebSocket transport at /acp.",
    )
    serve.add_argument("agent", metavar="FILE_OR_MODULE[:ATTR]",
                       help="a Python file or module holding one Agent subclass or instance (or name it after ':')")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    serve.add_argument("--path", default="/acp", help="endpoint path (default /acp)")
    serve.add_argument("--token", default=None,
                       help="bearer token every request must carry (default: $ACP_AGENT_TOKEN; none if unset)")
    serve.add_argument("--tokens", default=None, metavar="FILE",
                       help="a file of 'principal:token' lines ('#' comments), one per user: each user sees only "
                            "their own sessions (the file must not be readable by group or others)")
    serve.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                       help="browser origin allowed to connect (repeatable; '*' allows any)")
    serve.add_argument("--max-connections", type=int, default=1000,
                       help="client connections at once (and 4 TCP sockets per connection, below the descriptor "
                            "limit)")
    serve.add_argument("--idle-timeout", type=float, default=300.0,
                       help="seconds an HTTP connection nobody reads, or a WebSocket with no session that sends "
                            "nothing, is kept (default 300)")
    serve.add_argument("--head-timeout", type=float, default=10.0,
                       help="seconds a client may take to send a request's headers (default 10)")
    serve.add_argument("--max-body-bytes", type=int, default=16 * 1024 * 1024,
                       help="largest POST body or WebSocket message (default 16 MiB)")
    serve.add_argument("--max-buffered-bytes", type=int, default=64 * 1024 * 1024,
                       help="output held for one connection's slow client before the agent waits (default 64 MiB)")
    serve.add_argument("--max-output-stall", type=float, default=60.0,
                       help="seconds a connection may stay at --max-buffered-bytes with its client reading nothing "
                            "before it is closed (default 60)")
    serve.add_argument("--ssl-certfile", default=None, help="TLS certificate (PEM): serve https/wss")
    serve.add_argument("--ssl-keyfile", default=None, help="TLS private key (PEM)")
    serve.add_argument("--store", default=None, metavar="sqlite:PATH|postgres:DSN|memory",
                       help="where every connection keeps its sessions (default: $ACP_AGENT_STORE, else the agent's "
                            "own store or its SQLite file in the data directory); replicas share a postgres: store")
    _hosting_arguments(serve)
    serve.add_argument("--affinity-cookie", default=None, metavar="NAME=VALUE",
                       help="a cookie set on every answer (Path=/; HttpOnly) for a load balancer that routes by it")
    return parser


def _hosting_arguments(serve: argparse.ArgumentParser) -> None:
    """Where remote clients' sessions may live and whether they may name MCP servers (issue 39)."""
    serve.add_argument("--workspace", default=None, metavar="DIR",
                       help="sessions may only use directories under DIR (default: the directory serve was started "
                            "in), unless the agent declares its own workspace policy; / is always refused")
    serve.add_argument("--allow-client-mcp", action="store_true",
                       help="RISK: let clients name stdio/HTTP MCP servers: a stdio entry is a command any token "
                            "holder runs on this machine, an HTTP entry a request sent from the server's network")


def _hosting_options(args: argparse.Namespace, source: Any) -> dict[str, Any]:
    """The HttpOptions of ``--workspace`` and ``--allow-client-mcp`` (an agent's own ``workspace`` wins over the
    default directory, never over an explicit ``--workspace``)."""
    from .workspace import Workspace

    options: dict[str, Any] = {"allow_client_mcp": bool(args.allow_client_mcp)}
    if args.workspace is not None:
        options["workspace"] = Workspace(root=os.path.realpath(args.workspace))
    elif getattr(source, "workspace", None) is None:
        options["workspace"] = Workspace(root=os.path.realpath(os.getcwd()))
    return options


def _harden_process() -> None:
    """Keep this server's environment (tokens, DSNs, keys) and memory out of reach of its own children: non-dumpable
    where the platform allows (`acp_agent._util.processes.make_non_dumpable`)."""
    from ._util.processes import make_non_dumpable

    if not make_non_dumpable():
        logging.getLogger(__name__).info("acp: could not mark the server non-dumpable on this platform")


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


SHORT_TOKEN: Final = 16
"""Tokens shorter than this (in characters) get a warning: guessable."""


def _token_warnings(tokens: dict[str, str]) -> list[str]:
    """What ``serve --tokens`` warns about, without refusing to start: short tokens, an ignored ``$ACP_AGENT_TOKEN``."""
    problems = [f"the token of {principal!r} is short ({len(token)} characters); make one with: "
                f"python -c \"import secrets; print(secrets.token_hex(16))\""
                for principal, token in tokens.items() if len(token) < SHORT_TOKEN]
    if environment.read(environment.TOKEN):
        problems.append(f"${environment.TOKEN.name} is ignored: --tokens names every user's token")
    return problems


def affinity_header(spec: str) -> tuple[str, str]:
    """The ``Set-Cookie`` header of ``--affinity-cookie NAME=VALUE``."""
    name, sep, value = spec.partition("=")
    if not sep or not name or any(c in spec for c in ";, \t\r\n"):
        raise LoadError(f"--affinity-cookie wants NAME=VALUE (no spaces, commas or semicolons), got {spec!r}")
    return "Set-Cookie", f"{name}={value}; Path=/; HttpOnly"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    if list(sys.argv[1:] if argv is None else argv)[:1] == ["dev"]:  # listed in --help, run by acp_agent.__main__
        sys.stderr.write("acp: run the inspector as `python -m acp_agent dev` (acp_agent.__main__.main)\n")
        return 2
    args = _parser().parse_args(argv)
    problems = environment.check()
    if problems:  # one line each on stderr, exit status 2, as for a bad command line
        for problem in problems:
            sys.stderr.write(f"acp: {problem}\n")
        return environment.EXIT_STATUS
    logging.basicConfig(
        stream=sys.stderr,
        level=environment.read(environment.LOG_LEVEL),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        source, description = load_agent(args.agent)
        store_spec = args.store if args.store is not None else environment.read(environment.STORE)
        store = parse_store(store_spec) if store_spec else None
        extra_headers = (affinity_header(args.affinity_cookie),) if args.affinity_cookie else ()
        tokens = load_tokens(args.tokens) if args.tokens is not None else None
        if tokens is not None and args.token is not None:
            raise LoadError("give --token or --tokens, not both")
    except LoadError as exc:
        sys.stderr.write(f"acp: {exc}\n")
        return 2
    if tokens is not None:
        for problem in _token_warnings(tokens):
            sys.stderr.write(f"acp: warning: {problem}\n")
    try:
        from .http import HttpOptions, run_http
        from .http.server import describe_stack, guard_bounds  # fails early without the http extra
    except ImportError as exc:
        sys.stderr.write(f"acp: serving over HTTP needs the http extra: pip install 'acp-agent-sdk[http]' ({exc})\n")
        return 2

    def ready(url: str) -> None:
        sys.stderr.write(f"acp: serving {description} at {url} ({describe_stack()})\n")
        sys.stderr.flush()

    settings: dict[str, Any] = {}
    if args.ssl_certfile:
        settings["ssl_certfile"] = args.ssl_certfile
    if args.ssl_keyfile:
        settings["ssl_keyfile"] = args.ssl_keyfile
    token: Any = args.token if args.token is not None else environment.read(environment.TOKEN)
    if tokens is not None:
        from .http.security import token_table

        token = token_table(tokens)
    options: dict[str, Any] = {
        "path": args.path, "token": token, "allowed_origins": tuple(args.allow_origin),
        "max_connections": args.max_connections, "idle_timeout": args.idle_timeout,
        "max_body_bytes": args.max_body_bytes, "max_buffered_bytes": args.max_buffered_bytes,
        "max_output_stall": args.max_output_stall, "extra_headers": extra_headers,
        **_hosting_options(args, source),
    }
    try:
        HttpOptions(**options)
    except ValueError as exc:  # a setting out of range
        sys.stderr.write(f"acp: {exc}\n")
        return 2
    _harden_process()
    try:
        bounds = dataclasses.replace(guard_bounds(HttpOptions(**options)), head_timeout=args.head_timeout)
        run_http(source, host=args.host, port=args.port, ready=ready, uvicorn_settings=settings, store=store,
                 bounds=bounds, **options)
    except OSError as exc:
        sys.stderr.write(f"acp: cannot serve on {args.host}:{args.port}: {exc}\n")
        return 1
    return 0
