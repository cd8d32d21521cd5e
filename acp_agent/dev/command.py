"""The ``dev`` command line: what to inspect, where to serve the page, and the start-up line.

``python -m acp_agent dev [--port P] [--host H] [--no-open] [--record F] AGENT | -- COMMAND... |
--connect URL [--transport websocket|http] [--token T]`` or ``python -m acp_agent dev --replay F``.
Once the page is served it writes ``acp: inspector at http://127.0.0.1:PORT/?token=...`` on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import secrets
import sys
import webbrowser
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m acp_agent dev",
        description="Open an inspector in the browser for an ACP agent: a Python file or module (as `serve` takes), "
                    "any stdio agent command after `--`, or a remote agent with --connect.",
    )
    parser.add_argument("agent", nargs="?", metavar="FILE_OR_MODULE[:ATTR]",
                        help="a Python file or module holding one Agent subclass or instance")
    parser.add_argument("--connect", metavar="URL", help="inspect a remote agent (Streamable HTTP or WebSocket)")
    parser.add_argument("--transport", choices=["websocket", "http"], default=None,
                        help="remote transport (default: websocket for a ws:// or wss:// URL, else Streamable HTTP)")
    parser.add_argument("--cwd", default=None, metavar="DIR",
                        help="the agent's working directory and the cwd of new sessions (default: this one)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable for the agent process (repeatable)")
    parser.add_argument("--token", default=None, help="bearer token for --connect (default: $ACP_AGENT_TOKEN)")
    parser.add_argument("--host", default="127.0.0.1", help="address the page is served on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port of the page (default 0: a free one)")
    parser.add_argument("--no-open", action="store_true", help="do not open a browser")
    parser.add_argument("--record", metavar="FILE.jsonl", help="write the whole transcript to this file")
    parser.add_argument("--replay", metavar="FILE.jsonl", help="show a recorded transcript, without an agent")
    return parser


def _absolute(spec: str) -> str:
    """A ``FILE.py[:ATTR]`` spec made absolute, so the agent finds it from another working directory."""
    path, colon, attr = spec.rpartition(":") if spec.count(":") and not Path(spec).exists() else (spec, "", "")
    return str(Path(path).resolve()) + colon + attr if Path(path).exists() else spec


def main(argv: Sequence[str] | None = None) -> int:
    """Run the inspector; returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in args_list:
        cut = args_list.index("--")
        args_list, command = args_list[:cut], args_list[cut + 1:]
    args = _parser().parse_args(args_list)
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("ACP_AGENT_LOG_LEVEL", "WARNING").upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    chosen = sum(bool(x) for x in (args.agent, command, args.connect, args.replay))
    if chosen != 1:
        sys.stderr.write("acp: name exactly one agent: FILE_OR_MODULE, -- COMMAND..., --connect URL or --replay FILE\n")
        return 2
    try:
        import uvicorn

        from ..testing.remote import RemoteTransport
        from .link import AgentTarget, Inspection, load_recording
        from .web import build_app
    except ImportError as exc:
        sys.stderr.write(f"acp: the inspector needs the inspector extra: pip install 'acp-agent-sdk[inspector]' "
                         f"({exc})\n")
        return 2
    from ..http.server import bind_socket, exit_quietly_on_signals, server_url

    env: dict[str, str] = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            sys.stderr.write(f"acp: --env wants KEY=VALUE, got {item!r}\n")
            return 2
        env[key] = value
    cwd = str(Path(args.cwd).resolve()) if args.cwd else None
    if cwd is not None and not Path(cwd).is_dir():
        sys.stderr.write(f"acp: no such directory: {args.cwd}\n")
        return 2
    target: AgentTarget | None = None
    events: list[dict[str, Any]] = []
    if args.replay:
        try:
            events = load_recording(Path(args.replay))
        except (OSError, ValueError) as exc:
            sys.stderr.write(f"acp: cannot read {args.replay}: {exc}\n")
            return 2
    elif args.connect:
        transport: RemoteTransport = args.transport or ("websocket" if args.connect.startswith("ws") else "http")
        token = args.token if args.token is not None else os.environ.get("ACP_AGENT_TOKEN") or None
        target = AgentTarget(url=args.connect, transport=transport, token=token,
                             description=f"{args.connect} ({transport})", cwd=cwd)
    elif command:
        target = AgentTarget(command=command, description=" ".join(command), env=env, cwd=cwd)
    else:
        spec = args.agent
        if spec.endswith(".py") and not Path(spec).is_file():
            sys.stderr.write(f"acp: no such file: {spec}\n")
            return 2
        if cwd is not None:
            spec = _absolute(spec)
        target = AgentTarget(command=[sys.executable, "-m", "acp_agent.dev.child", spec], description=spec, env=env,
                             cwd=cwd)
    record: IO[bytes] | None = None
    if args.record:
        try:
            record = open(args.record, "wb")  # noqa: SIM115 - open for the whole run, closed below
        except OSError as exc:
            sys.stderr.write(f"acp: cannot write {args.record}: {exc}\n")
            return 2
    secret = secrets.token_urlsafe(24)
    inspection = Inspection(target, record=record, events=events)
    app = build_app(inspection, secret, bound_host=args.host)
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        sys.stderr.write(f"acp: cannot serve on {args.host}:{args.port}: {exc}\n")
        return 1
    url = server_url(args.host, sock.getsockname()[1], "/") + f"?token={secret}"

    class _Server(uvicorn.Server):
        def capture_signals(self) -> contextlib._GeneratorContextManager[None]:
            return exit_quietly_on_signals(self)

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                sys.stderr.write(f"acp: inspector at {url}\n")
                sys.stderr.flush()
                if not args.no_open:
                    webbrowser.open(url)

    config = uvicorn.Config(app, lifespan="on", log_config=None, access_log=False, log_level="warning",
                            ws_per_message_deflate=False, timeout_graceful_shutdown=5)
    try:
        _Server(config).run(sockets=[sock])
    finally:
        sock.close()
        if record is not None:
            record.close()
    return 0
