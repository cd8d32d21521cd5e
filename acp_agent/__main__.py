"""``python -m acp_agent`` and the ``acp-agent`` script: the command line of `acp_agent.cli`."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
