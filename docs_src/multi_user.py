import os

from acp_agent import Limits, RequestError, Session
from acp_agent.http import asgi_app
from docs_src.first_agent import EchoAgent

USERS = {"alice": os.environ.get("ALICE_TOKEN", "alice-token"), "bob": os.environ.get("BOB_TOKEN", "bob-token")}


def who(token: str) -> str | None:
    """The principal a bearer token stands for, or None to refuse it (your identity provider goes here)."""
    return next((user for user, known in USERS.items() if known == token), None)


class TeamAgent(EchoAgent):
    async def new_session(self, session: Session) -> None:
        if session.principal == "bob" and session.cwd.startswith("/srv/secret"):
            raise RequestError.invalid_params("bob may not work in /srv/secret")


app = asgi_app(
    TeamAgent,
    token=who,
    recheck_interval=30,  # a revoked token closes its WebSockets within 30 s
    limits=Limits(max_principal_connections=8, max_principal_sessions=16, max_principal_stored_sessions=500,
                  max_principal_processes=8, max_history_bytes=64 * 1024 * 1024),
)
