from typing import Any

from pydantic import BaseModel

from acp_agent import Agent, ClientPeer, ContentBlock, RequestError, Session, StopReason, extension


class IndexQuery(BaseModel):
    folder: str


class IndexingAgent(Agent):
    name = "indexing-agent"

    def __init__(self) -> None:
        self.reindexed = 0

    @extension("_acme/index_status")  # a request the client may send
    async def index_status(self, params: IndexQuery, client: ClientPeer) -> dict[str, Any]:
        return {"folder": params.folder, "files": 1200}  # a pydantic params model is validated: -32602 if not

    @extension("_acme/reindex", notification=True)
    async def reindex(self, params: dict[str, Any], client: ClientPeer) -> None:
        self.reindexed += 1

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        try:
            buffers = await session.client.request("_zed/open_buffers", {}, timeout=5)  # the client's extension
        except RequestError:  # -32601: this client has no such method
            buffers = {"buffers": []}
        await session.say(f"{len(buffers['buffers'])} open buffers", meta={"acme.dev/source": "zed"})
        return "end_turn"
