import sys

import anyio

from acp_agent.testing import connect_remote


async def main(url: str) -> None:
    # The same checked Client as connect_agent, over both remote transports.
    for transport in ("websocket", "http"):
        async with connect_remote(url, transport=transport, token="s3cret") as client:
            await client.initialize()
            sid = await client.new_session("/tmp")
            view = await client.prompt_and_wait(sid, "hello")
            print(transport, list(view.messages().values()), view.stop_reason)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])  # python -m docs_src.testing_remote http://127.0.0.1:8000/acp
