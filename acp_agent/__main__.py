"""``python -m acp_agent``: the command line (``serve``: see `acp_agent.cli`; ``dev``: `acp_agent.dev`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .cli import main as _cli_main


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; ``dev`` (the inspector, a user of the testing client) is dispatched here."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["dev"]:
        from .dev import main as dev_main

        return dev_main(args[1:])
    return _cli_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
