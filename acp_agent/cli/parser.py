"""The one parser of ``python -m acp_agent``: every command and its arguments, and nothing else.

It imports argparse only: the chosen command's module (`acp_agent.cli.serve`, `acp_agent.cli.stdio`,
`acp_agent.dev`, `acp_agent.demo`) loads after parsing, so ``--help`` and ``stdio`` never pay for uvicorn or
starlette.
"""

from __future__ import annotations

import argparse

__all__ = ["build_parser"]

_AGENT_HELP = "a Python file or module holding one Agent subclass or instance (or name it after ':')"


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command: ``serve``, ``stdio``, ``dev`` and ``demo``."""
    parser = argparse.ArgumentParser(prog="python -m acp_agent", description="acp-agent command line")
    commands = parser.add_subparsers(dest="command", required=True)
    _serve(commands.add_parser(
        "serve", help="serve an agent over Streamable HTTP and WebSocket",
        description="Serve the agent in FILE_OR_MODULE over ACP's Streamable HTTP and WebSocket transport at /acp.",
    ))
    stdio = commands.add_parser(
        "stdio", help="run an agent on stdin/stdout (what an editor launches)",
        description="Run the agent in FILE_OR_MODULE as an ACP agent process on stdin/stdout, as run_stdio does.",
    )
    stdio.add_argument("agent", metavar="FILE_OR_MODULE[:ATTR]", help=_AGENT_HELP)
    _dev(commands.add_parser(
        "dev", help="open the inspector in the browser (the inspector extra)",
        description="Open an inspector in the browser for an ACP agent: a Python file or module (as `serve` takes), "
                    "any stdio agent command after `--`, or a remote agent with --connect.",
    ))
    demo = commands.add_parser(
        "demo", help="drive the example agents over real pipes and print each message (make demo)",
        description="Drive the example agents over real pipes and print a readable timeline.",
    )
    demo.add_argument("--agent", default=None, metavar="PATH",
                      help="echo agent script (default: examples/echo_agent.py)")
    demo.add_argument("--background-agent", default=None, metavar="PATH",
                      help="background agent script (default: examples/background_agent.py)")
    return parser


def _serve(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("agent", metavar="FILE_OR_MODULE[:ATTR]", help=_AGENT_HELP)
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
    serve.add_argument("--body-timeout", type=float, default=60.0,
                       help="seconds a client may take to send a request's body after its headers (default 60)")
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
                            "own store, else NAME.served.sqlite3 in the data directory: never the file its stdio "
                            "runs use); replicas share a postgres: store")
    quotas = serve.add_argument_group(
        "quotas per user", "What one principal (one user of --tokens) may hold at once. On by default with --tokens "
        "(with one user, only --max-history-bytes is: --max-connections bounds the rest); a value the agent's Limits "
        "sets is kept unless a flag names another; 0 means no limit.")
    quotas.add_argument("--max-user-connections", type=int, default=None, metavar="N",
                        help="connections one user may have open (default 16)")
    quotas.add_argument("--max-user-sessions", type=int, default=None, metavar="N",
                        help="sessions one user may have active (default 32)")
    quotas.add_argument("--max-user-stored-sessions", type=int, default=None, metavar="N",
                        help="sessions one user may keep in the store (default 1000)")
    quotas.add_argument("--max-user-processes", type=int, default=None, metavar="N",
                        help="terminal processes one user's sessions may run (default 16)")
    quotas.add_argument("--max-history-bytes", type=int, default=None, metavar="N",
                        help="bytes of history one session may hold (default 64 MiB)")
    serve.add_argument("--retention", type=float, default=None, metavar="DAYS",
                       help="delete stored sessions unused for DAYS days (default: keep them until deleted)")
    serve.add_argument("--affinity-cookie", default=None, metavar="NAME=VALUE",
                       help="a cookie set on every answer (Path=/; HttpOnly) for a load balancer that routes by it")
    serve.add_argument("--advertise-url", default=None, metavar="URL",
                       help="this replica's http://HOST:PORT on the replicas' network; with --peer, a Streamable "
                            "HTTP request reaching the wrong replica is forwarded to the one holding its connection, "
                            "so the load balancer needs no affinity")
    serve.add_argument("--peer", action="append", default=[], metavar="URL",
                       help="another replica's --advertise-url (repeatable; requests are only forwarded to these)")
    serve.add_argument("--turn-grace", type=float, default=30.0,
                       help="seconds a WebSocket connection that dropped mid-turn keeps running its turn for the "
                            "client to reattach (default 30; 0 cancels the turn at once)")
    serve.add_argument("--drain-delay", type=float, default=0.0,
                       help="seconds between SIGTERM (/readyz answers 503) and closing the connections, for the "
                            "load balancer to take this replica out (default 0)")
    serve.add_argument("--workspace", default=None, metavar="DIR",
                       help="sessions may only use directories under DIR (default: the directory serve was started "
                            "in), unless the agent declares its own workspace policy; / itself is always refused")
    serve.add_argument("--allow-client-mcp", action="store_true",
                       help="RISK: let clients name stdio/HTTP MCP servers: a stdio entry is a command any token "
                            "holder runs on this machine, an HTTP entry a request sent from the server's network")


def _dev(dev: argparse.ArgumentParser) -> None:
    dev.add_argument("agent", nargs="?", metavar="FILE_OR_MODULE[:ATTR]",
                     help="a Python file or module holding one Agent subclass or instance")
    dev.add_argument("--connect", metavar="URL", help="inspect a remote agent (Streamable HTTP or WebSocket)")
    dev.add_argument("--transport", choices=["websocket", "http"], default=None,
                     help="remote transport (default: websocket for a ws:// or wss:// URL, else Streamable HTTP)")
    dev.add_argument("--cwd", default=None, metavar="DIR",
                     help="the agent's working directory and the cwd of new sessions (default: this one)")
    dev.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                     help="an environment variable for the agent process (repeatable)")
    dev.add_argument("--token", default=None, help="bearer token for --connect (default: $ACP_AGENT_TOKEN)")
    dev.add_argument("--host", default="127.0.0.1", help="address the page is served on (default 127.0.0.1)")
    dev.add_argument("--port", type=int, default=0, help="port of the page (default 0: a free one)")
    dev.add_argument("--no-open", action="store_true", help="do not open a browser")
    dev.add_argument("--record", metavar="FILE.jsonl", help="write the whole transcript to this file")
    dev.add_argument("--replay", metavar="FILE.jsonl", help="show a recorded transcript, without an agent")
