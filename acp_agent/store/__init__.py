"""Session stores: where sessions live when they are not active, and across restarts.

[`SessionStore`][acp_agent.store.SessionStore] is the interface; [`MemoryStore`][acp_agent.store.MemoryStore] keeps
sessions in the process (the in-memory test client's default), [`SqliteStore`][acp_agent.store.SqliteStore] in one file
per agent (the default of [`run_stdio`][acp_agent.run_stdio]), and ``acp_agent.store.postgres.PostgresStore`` in a
PostgreSQL database shared by several agent processes (``pip install 'acp-agent-sdk[postgres]'``;
psycopg is imported only when that module is).
"""

from .._util.lazy import publish
from ..errors import StoreError, StoreUnusableError
from .base import SessionStore, StoredSession
from .memory import MemoryStore
from .sqlite import DATA_DIR_ENV, SCHEMA_VERSION, SqliteStore, data_dir

__all__ = [
    "DATA_DIR_ENV",
    "SCHEMA_VERSION",
    "MemoryStore",
    "SessionStore",
    "SqliteStore",
    "StoreError",
    "StoreUnusableError",
    "StoredSession",
    "data_dir",
]

publish(__name__, __all__)
