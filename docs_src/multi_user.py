import os

from acp_agent import Limits, Workspace
from acp_agent.http import asgi_app
from docs_src.first_agent import EchoAgent

USERS = {"alice": os.environ.get("ALICE_TOKEN", "alice-token"), "bob": os.environ.get("BOB_TOKEN", "bob-token")}


def who(token: str) -> str | None:
    """The principal a bearer token stands for, or None to refuse it (your identity provider goes here)."""
    return next((user for user, known in USERS.items() if known == token), None)


class TeamAgent(EchoAgent):
    # Each user's sessions live under their own directory: checked on session/new, resume (an active session
    # too), fork, with symlinks resolved; anything else is refused -32602 with data {"field": "cwd", ...}.
    workspace = Workspace(roots={user: f"/srv/work/{user}" for user in USERS})


app = asgi_app(
    TeamAgent,
    token=who,
    recheck_interval=30,  # a revoked token closes its WebSockets within 30 s
    limits=Limits(max_principal_connections=8, max_principal_sessions=16, max_principal_stored_sessions=500,
                  max_principal_processes=8, max_history_bytes=64 * 1024 * 1024),
)
