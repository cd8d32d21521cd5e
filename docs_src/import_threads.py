import json
from pathlib import Path

import anyio

from acp_agent import AgentMessage, TextContent, UserMessage, run_stdio
from acp_agent.records import SessionRecord
from acp_agent.store import SessionStore, SqliteStore
from docs_src.first_agent import EchoAgent as MyAgent


async def import_threads(folder: Path, store: SessionStore) -> None:
    for path in sorted(folder.glob("*.json")):  # {"id", "cwd", "title", "turns": [[asked, answered], ...]}
        thread = json.loads(path.read_text())
        sid = f"sess_imported_{thread['id']}"
        if await store.load(sid) is not None:
            continue  # imported before (and maybe continued since)
        record = SessionRecord(session_id=sid, cwd=thread["cwd"], title=thread["title"])
        for n, (asked, answered) in enumerate(thread["turns"]):
            record.history.record(UserMessage(message_id=f"u{n}", content=[TextContent(text=asked)]))
            record.history.record(AgentMessage(message_id=f"a{n}", content=[TextContent(text=answered)]))
        await store.save(record)


async def main() -> None:
    store = SqliteStore.for_agent(MyAgent.name)  # the file run_stdio will use
    await import_threads(Path.home() / ".oldtool" / "threads", store)
    await store.close()


if __name__ == "__main__":
    anyio.run(main)
    run_stdio(MyAgent())
