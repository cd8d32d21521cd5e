"""``python -m acp_agent``: the command line (see :mod:`acp_agent.cli`)."""

from .cli import main

raise SystemExit(main())
