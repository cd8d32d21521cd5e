"""An agent for the store tests, run as a process: ``slow N`` streams N chunks 0.05 s apart;
``bgwait CMD`` leaves a listed terminal (and the tool call it ends) running after the turn;
``child`` leaves a detached subagent working (with a terminal of its own) after the turn;
``title T`` sets the session title; anything else is echoed. ``ACP_TEST_AGENT_NAME`` names it
(the name picks its SQLite file) and ``ACP_TEST_BUSY_TIMEOUT`` how long its saves wait for a
locked file, ``ACP_TEST_COMMIT_DELAY`` how long its journaled saves wait for their commit; with
``ACP_TEST_PG_DSN`` it keeps its sessions in that PostgreSQL database instead."""

from __future__ import annotations

import os

import anyio

from acp_agent import Agent, ContentBlock, Session, StopReason, TextContent, run_stdio
from acp_agent.store import SqliteStore


class StoreAgent(Agent):
    """See the module docstring."""

    name = os.environ.get("ACP_TEST_AGENT_NAME", "store-test-agent")

    async def new_session(self, session: Session) -> None:
        session.data["turns"] = 0

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = " ".join(b.text for b in prompt if isinstance(b, TextContent))
        command, _, arg = text.partition(" ")
        session.data["turns"] = session.data.get("turns", 0) + 1
        if command == "slow":
            stream = session.message()
            for i in range(int(arg)):
                await stream.write(f"c{i} ")
                await anyio.sleep(0.05)
        elif command == "bgwait":
            tool = await session.start_tool_call(arg, kind="execute", status="in_progress")
            await session.start_terminal(["sh", "-c", arg], tool_call=tool, ends_tool_call=True, detach=True)
        elif command == "child":
            sub = await session.spawn_subagent("worker", description="keeps working")

            async def work(child: Session) -> None:
                await child.start_terminal(["sleep", "5"], detach=True)
                await child.say("working")
                await anyio.sleep_forever()

            sub.start(work)
        elif command == "title":
            await session.update_info(title=arg)
            await session.say("titled")
        else:
            await session.say(text)
        return "end_turn"


if __name__ == "__main__":
    dsn = os.environ.get("ACP_TEST_PG_DSN")
    if dsn:
        from acp_agent.store.postgres import PostgresStore

        run_stdio(StoreAgent(), store=PostgresStore(dsn))
    else:
        store = SqliteStore.for_agent(StoreAgent.name)
        store.busy_timeout = float(os.environ.get("ACP_TEST_BUSY_TIMEOUT", store.busy_timeout))
        if "ACP_TEST_COMMIT_DELAY" in os.environ:
            import acp_agent.store.sqlite

            acp_agent.store.sqlite.COMMIT_DELAY = float(os.environ["ACP_TEST_COMMIT_DELAY"])
        run_stdio(StoreAgent(), store=store)
