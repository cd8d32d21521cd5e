"""``python -m acp_agent serve FILE_OR_MODULE[:ATTR] --host H --port P``: an agent over HTTP and WebSocket.

``serve`` loads the agent (the one [`Agent`][acp_agent.Agent] subclass or instance in the file or
module, or the one named after the colon) and serves it over Streamable HTTP and WebSocket at
``/acp``. Once it listens it writes the URL to stderr (``--port 0`` picks a free port). A class
gets a new instance for every client connection; an instance is shared by all of them. Every
connection keeps its sessions in one store (``--store``; by default the agent's served SQLite file, never the
one its stdio runs use), so clients resume them on a new connection, and replicas sharing a ``postgres:`` store
resume each other's. Quotas per user are on by default (`SERVE_QUOTAS`, ``--max-user-...`` flags) and
``--retention DAYS`` deletes sessions nobody used for that long.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, Final

from .._util import environment, prelude
from .._util.paths import data_dir
from .._util.processes import make_non_dumpable
from ..auth import Workspace
from ..limits import DEFAULT_LIMITS, Limits
from ..loader import LoadError, affinity_header, load_agent, load_tokens, parse_store

__all__ = ["SERVE_QUOTAS", "SHORT_TOKEN", "run", "serve_limits"]

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


SERVE_QUOTAS: Final[Mapping[str, tuple[str, int]]] = {
    "max_principal_connections": ("max_user_connections", 16),
    "max_principal_sessions": ("max_user_sessions", 32),
    "max_principal_stored_sessions": ("max_user_stored_sessions", 1000),
    "max_principal_processes": ("max_user_processes", 16),
    "max_history_bytes": ("max_history_bytes", 64 * 1024 * 1024),
}
"""The quotas ``serve`` turns on: each `Limits` field, its ``serve`` flag (``--max-user-...``) and its default.
The per-user ones are on by default with ``--tokens`` (several users); with one user (``--token`` or none) the
server-wide ``--max-connections`` already bounds that user, so only ``max_history_bytes`` is."""

_ONE_USER_QUOTAS: Final = frozenset({"max_history_bytes"})


def serve_limits(source: object, args: argparse.Namespace) -> Limits:
    """The limits ``serve`` runs ``source`` with: the agent's own ``limits``, each quota of `SERVE_QUOTAS` it leaves
    off set to the ``serve`` default (the per-user ones with ``--tokens`` only), and each quota flag given (0: no
    limit) winning over both."""
    several_users = getattr(args, "tokens", None) is not None
    base = getattr(source, "limits", None)
    base = base if isinstance(base, Limits) else DEFAULT_LIMITS
    chosen: dict[str, int | None] = {}
    for field, (flag, default) in SERVE_QUOTAS.items():
        given: int | None = getattr(args, flag)
        if given is not None:
            if given < 0:
                raise LoadError(f"--{flag.replace('_', '-')} must be 0 (no limit) or a positive integer")
            chosen[field] = given or None
        else:
            current: int | None = getattr(base, field)
            on = several_users or field in _ONE_USER_QUOTAS
            chosen[field] = current if current is not None or not on else default
    return dataclasses.replace(base, **chosen)  # type: ignore[arg-type]


def _hosting_options(args: argparse.Namespace, source: Any) -> dict[str, Any]:
    """The HttpOptions of ``--workspace`` and ``--allow-client-mcp``: an agent's own ``workspace`` wins over the
    default directory (the one ``serve`` was started in), never over an explicit ``--workspace``."""
    options: dict[str, Any] = {"allow_client_mcp": bool(args.allow_client_mcp)}
    if args.workspace is not None:
        options["workspace"] = Workspace(root=os.path.realpath(args.workspace))
    elif getattr(source, "workspace", None) is None:
        options["workspace"] = Workspace(root=os.path.realpath(os.getcwd()))
    return options


def _secrets_in_workspace(workspace: Workspace | None, tokens_file: str | None, store_spec: str | None) -> list[str]:
    """The server's own files that lie inside the workspace ``serve`` chose (``--workspace`` or the directory it was
    started in), where every user's file tools (``read_file``, ``search``: no approval) would read them: the tokens
    file (every user's token), an SQLite store given as ``sqlite:PATH`` and the data directory (the default store,
    the editor's stdio store). Empty for an agent's own workspace policy, which ``serve`` cannot judge, and for
    ``--workspace /`` (an operator who opens every file on purpose)."""
    if workspace is None or workspace.root is None:
        return []
    root = os.path.realpath(workspace.root)
    if root == os.path.realpath("/"):
        return []
    found: list[tuple[str, str]] = []
    if tokens_file is not None:
        found.append(("the tokens file", tokens_file))
    if store_spec is not None and store_spec.startswith("sqlite:"):
        found.append(("the store", os.path.expanduser(store_spec.removeprefix("sqlite:"))))
    if store_spec is None or data_dir().exists():
        found.append(("the data directory", str(data_dir())))

    def inside(path: str) -> bool:
        return os.path.commonpath([root, os.path.realpath(path)]) == root

    return [f"{what} {path} is inside the workspace {root}" for what, path in found if inside(path)]


def _harden_process() -> None:
    """Keep this server's environment (tokens, DSNs, keys) and memory out of reach of its own children: non-dumpable
    where the platform allows (`acp_agent._util.processes.make_non_dumpable`)."""
    if not make_non_dumpable():
        logging.getLogger(__name__).info("acp: could not mark the server non-dumpable on this platform")


def run(args: argparse.Namespace) -> int:
    """Serve the agent ``args`` name until SIGINT/SIGTERM; returns the exit status."""
    prelude.prepare()  # a bad ACP_AGENT_* value: one line each on stderr, exit status 2
    try:
        source, description = load_agent(args.agent)
        store_spec = args.store if args.store is not None else environment.read(environment.STORE)
        store = parse_store(store_spec) if store_spec else None
        extra_headers = (affinity_header(args.affinity_cookie),) if args.affinity_cookie else ()
        tokens = load_tokens(args.tokens) if args.tokens is not None else None
        if tokens is not None and args.token is not None:
            raise LoadError("give --token or --tokens, not both")
        limits = serve_limits(source, args)
    except LoadError as exc:
        sys.stderr.write(f"acp: {exc}\n")
        return 2
    if tokens is not None:
        for problem in _token_warnings(tokens):
            sys.stderr.write(f"acp: warning: {problem}\n")
    try:
        from ..http import HttpOptions, run_http
        from ..http.server import describe_stack, guard_bounds  # fails early without the http extra
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
        from ..http.security import token_table

        token = token_table(tokens)
    options: dict[str, Any] = {
        "path": args.path, "token": token, "allowed_origins": tuple(args.allow_origin),
        "max_connections": args.max_connections, "idle_timeout": args.idle_timeout,
        "max_body_bytes": args.max_body_bytes, "max_buffered_bytes": args.max_buffered_bytes,
        "max_output_stall": args.max_output_stall, "extra_headers": extra_headers, "limits": limits,
        "retention": args.retention, "advertise_url": args.advertise_url, "peers": tuple(args.peer),
        "turn_grace": args.turn_grace, "drain_delay": args.drain_delay, **_hosting_options(args, source),
    }
    try:
        HttpOptions(**options)
    except ValueError as exc:  # a setting out of range
        sys.stderr.write(f"acp: {exc}\n")
        return 2
    exposed = _secrets_in_workspace(options.get("workspace"), args.tokens, store_spec)
    if exposed:  # read_file and search need no approval: every user would read these
        for problem in exposed:
            sys.stderr.write(f"acp: {problem}: every user's file tools could read it\n")
        sys.stderr.write("acp: start serve in a directory holding only the users' projects, or pass --workspace DIR\n")
        return 2
    _harden_process()
    try:
        bounds = dataclasses.replace(guard_bounds(HttpOptions(**options)), head_timeout=args.head_timeout,
                                     body_timeout=args.body_timeout)
        run_http(source, host=args.host, port=args.port, ready=ready, uvicorn_settings=settings, store=store,
                 bounds=bounds, **options)
    except OSError as exc:
        sys.stderr.write(f"acp: cannot serve on {args.host}:{args.port}: {exc}\n")
        return 1
    return 0
