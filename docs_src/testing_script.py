import anyio

from acp_agent.testing import connect_agent
from docs_src.first_agent import EchoAgent


async def main() -> None:
    async with connect_agent(EchoAgent()) as client:  # the transcript is checked when the block ends
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "hello")
        print(list(view.messages().values()), view.stop_reason)


if __name__ == "__main__":
    anyio.run(main)
