"""``python -m acp_agent``: the command line (see `acp_agent.cli`)."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
