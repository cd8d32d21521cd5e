"""The ``dev`` command: what to inspect, where to serve the page, and the start-up line.

``python -m acp_agent dev [--port P] [--host H] [--no-open] [--record F] AGENT | -- COMMAND... |
--connect URL [--transport websocket|http] [--token T]`` or ``python -m acp_agent dev --replay F``
(parsed by `acp_agent.cli`, with every other command). A Python agent runs as ``python -m acp_agent stdio
AGENT``. Once the page is served it writes ``acp: inspector at http://127.0.0.1:PORT/#token=...`` on stderr.

The browser is opened on a private launcher file (``0600`` in a ``0700`` temporary directory, removed once the page
has connected, and at exit) that sends it on to that URL: a browser's command line is readable by every local
user, so the secret never goes there. ``--record`` files are created ``0600``: they hold prompts and keys.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import os
import secrets
import shutil
import sys
import tempfile
import webbrowser
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from .._util import environment, prelude

__all__ = ["open_private", "run", "write_launcher"]


def _absolute(spec: str) -> str:
    """A ``FILE.py[:ATTR]`` spec made absolute, so the agent finds it from another working directory."""
    path, colon, attr = spec.rpartition(":") if spec.count(":") and not Path(spec).exists() else (spec, "", "")
    return str(Path(path).resolve()) + colon + attr if Path(path).exists() else spec


def open_private(path: str) -> IO[bytes]:
    """``path`` opened for writing from scratch, readable by this user only (``0600``, also when it existed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    if sys.platform != "win32":  # Windows has no such mode bits (nor fchmod)
        try:
            os.fchmod(fd, 0o600)
        except OSError:
            os.close(fd)
            raise
    return os.fdopen(fd, "wb")


def write_launcher(url: str) -> Path:
    """A private HTML file that sends the browser on to ``url`` (``0600``, in a new ``0700`` directory)."""
    folder = Path(tempfile.mkdtemp(prefix="acp-inspector-"))
    quoted = html.escape(url, quote=True)
    page = (f'<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
            f'<meta http-equiv="refresh" content="0; url={quoted}"><title>acp-agent inspector</title>'
            f'<a href="{quoted}">Open the inspector</a>\n')
    path = folder / "inspector.html"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(page)
    return path


def run(args: argparse.Namespace, command: Sequence[str] = ()) -> int:
    """Run the inspector on what ``args`` (the parsed ``dev`` command) and ``command`` (the agent command
    after ``--``, if any) name; returns the exit status."""
    command = list(command)
    prelude.prepare()
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
        token = args.token if args.token is not None else environment.read(environment.TOKEN)
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
        target = AgentTarget(command=[sys.executable, "-m", "acp_agent", "stdio", spec], description=spec, env=env,
                             cwd=cwd)
    record: IO[bytes] | None = None
    if args.record:
        try:
            record = open_private(args.record)  # open for the whole run, closed below
        except OSError as exc:
            sys.stderr.write(f"acp: cannot write {args.record}: {exc}\n")
            return 2
    secret = secrets.token_urlsafe(24)
    inspection = Inspection(target, record=record, events=events)
    launcher: list[Path] = []

    def forget_launcher() -> None:
        while launcher:
            shutil.rmtree(launcher.pop().parent, ignore_errors=True)

    app = build_app(inspection, secret, bound_host=args.host, on_admitted=forget_launcher)
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        sys.stderr.write(f"acp: cannot serve on {args.host}:{args.port}: {exc}\n")
        return 1
    url = server_url(args.host, sock.getsockname()[1], "/") + f"#token={secret}"

    class _Server(uvicorn.Server):
        def capture_signals(self) -> contextlib._GeneratorContextManager[None]:
            return exit_quietly_on_signals(self)

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                sys.stderr.write(f"acp: inspector at {url}\n")
                sys.stderr.flush()
                if not args.no_open:
                    try:
                        launcher.append(write_launcher(url))
                    except OSError as exc:  # the page asks for the printed URL instead
                        sys.stderr.write(f"acp: cannot write the browser's launcher file: {exc}\n")
                        webbrowser.open(url.split("#", 1)[0])
                    else:
                        webbrowser.open(launcher[-1].as_uri())

    config = uvicorn.Config(app, lifespan="on", log_config=None, access_log=False, log_level="warning",
                            ws_per_message_deflate=False, timeout_graceful_shutdown=5)
    try:
        _Server(config).run(sockets=[sock])
    finally:
        sock.close()
        forget_launcher()
        if record is not None:
            record.close()
    return 0
