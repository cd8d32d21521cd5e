"""The echo agent as a plain ASGI app, for serving with hypercorn (``tests/e2e/test_http2.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acp_agent.http import asgi_app
from acp_agent.store import MemoryStore
from examples.echo_agent import EchoAgent

app = asgi_app(EchoAgent, store=MemoryStore())
