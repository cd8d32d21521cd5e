"""Where acp-agent keeps files of its own: one data directory per user (sessions, process ledgers)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from . import environment

__all__ = ["DATA_DIR_ENV", "LEDGER_DIR", "data_dir", "ledger_dir"]

DATA_DIR_ENV: Final = environment.DATA_DIR.name
"""The environment variable that overrides where agents keep their session files."""

LEDGER_DIR: Final = "processes"
"""The directory of the terminal ledgers (``acp_agent._util.reaper``), in `data_dir`."""


def data_dir() -> Path:
    """Where agents keep their session files: ``$ACP_AGENT_DATA_DIR``, else the user data directory
    (``~/.local/share/acp-agent`` on Linux, via ``platformdirs``)."""
    chosen = environment.read(environment.DATA_DIR)
    if chosen:
        return Path(chosen).expanduser()
    try:
        import platformdirs
    except ImportError:  # pragma: no cover - platformdirs is a dependency
        base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        return Path(base) / "acp-agent"
    return Path(platformdirs.user_data_dir("acp-agent", appauthor=False))


def ledger_dir() -> Path:
    """Where the ledgers of terminal processes are (``<data dir>/processes``)."""
    return data_dir() / LEDGER_DIR
