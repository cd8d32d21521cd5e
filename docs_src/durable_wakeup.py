from collections.abc import Awaitable, Callable
from typing import Any

from acp_agent import Agent, ContentBlock, Session, StopReason

Work = Callable[[], Awaitable[StopReason | None]]


class DeployWatcher(Agent):
    name = "deploy-watcher"

    def check_deploy(self, session: Session, env: str) -> Work:
        async def check() -> StopReason:
            await session.say(f"Deploy check on {env}: all healthy.")
            return "end_turn"

        return check

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        env = "staging"
        # Durable: kept with the session, so a restart does not lose it.
        await session.schedule(600, self.check_deploy(session, env), title="Check the deploy",
                               durable="check-deploy", payload={"env": env})
        await session.say("I will check the deploy in 10 minutes.")
        return "end_turn"

    async def rearm_wakeup(self, session: Session, name: str, payload: Any) -> Work | None:
        if name == "check-deploy":  # the session was loaded again: schedule it for the time left
            return self.check_deploy(session, payload["env"])
        return None
