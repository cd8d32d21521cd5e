"""The command line, one front door: ``python -m acp_agent serve | stdio | dev | demo`` (and ``acp-agent``).

`main` parses every command with one parser (`acp_agent.cli.parser`) and only then imports the
chosen command's module: ``serve`` (`acp_agent.cli.serve`: Streamable HTTP and WebSocket on uvicorn),
``stdio`` (`acp_agent.cli.stdio`: one agent on stdin/stdout, as an editor or the inspector launches it),
``dev`` (`acp_agent.dev`: the inspector in the browser) and ``demo`` (`acp_agent.demo`). A command that
runs an agent names it as ``FILE_OR_MODULE[:ATTR]``; the loader's names (`acp_agent.loader`) stay importable
from here.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..loader import AgentSource, LoadError, affinity_header, load_agent, load_tokens, parse_store
from .parser import build_parser

__all__ = ["AgentSource", "LoadError", "affinity_header", "load_agent", "load_tokens", "main", "parse_store"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``argv``: the arguments after the program name); returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    head, command = arguments, list[str]()
    if "--" in arguments:  # dev's `-- COMMAND...`: an agent command line, never parsed as ours
        cut = arguments.index("--")
        head, command = arguments[:cut], arguments[cut + 1:]
    args = parser.parse_args(head)
    if command and args.command != "dev":
        args = parser.parse_args(arguments)  # argparse's own answer, as before `--` meant anything
    if args.command == "serve":
        from .serve import run as run_serve

        return run_serve(args)
    if args.command == "stdio":
        from .stdio import run as run_stdio_command

        return run_stdio_command(args)
    if args.command == "dev":
        from ..dev import run as run_dev

        return run_dev(args, command)
    from ..demo import run as run_demo

    return run_demo(args.agent, args.background_agent)
