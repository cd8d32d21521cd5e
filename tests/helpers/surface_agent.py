"""An agent for the rest of the v2 surface, run on stdio by ``tests/interop/test_interop_surface.py``:
URL-mode questions, extension methods both ways and ``_meta`` round trips.

    _test/echo (request)        answers {"echo": params, "client": <client name>}
    _test/ping (notification)   remembered; ``/pings`` says them
    /url                        a URL flow (elicitationId "flow-<n>"); says "url: accept" (then sends
                                elicitation/complete) or "url: decline"; a dismissed or withdrawn one ends cancelled
    /call                       calls the client's _test/hello {"n": 1}; says the JSON result
    /call-missing               calls _test/missing; says the error code
    /call-slow                  calls _test/slow with a 0.5 s timeout; says the error code
    /call-wait                  calls _test/slow with no timeout (session/cancel withdraws it)
    /pings                      waits until a _test/ping arrived; says the JSON list of their params
    /meta                       says JSON {"session": session.meta, "prompt": session.prompt_meta,
                                "blocks": [block _meta]}, sent with _meta {"echo": session.prompt_meta}
    anything else               echoed back
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acp_agent import (
    Agent,
    ClientPeer,
    ContentBlock,
    RequestError,
    Session,
    StopReason,
    TextContent,
    extension,
    run_stdio,
)

PING_WAIT_S = 20.0


class SurfaceAgent(Agent):
    """See the module docstring."""

    name = "surface-agent"
    version = "0.0.0"

    def __init__(self) -> None:
        self.pings: list[Any] = []
        self.flows = itertools.count(1)

    @extension("_test/echo")
    async def echo(self, params: dict[str, Any], client: ClientPeer) -> dict[str, Any]:
        return {"echo": params, "client": client.info.name if client.info else None}

    @extension("_test/ping", notification=True)
    async def ping(self, params: dict[str, Any], client: ClientPeer) -> None:
        self.pings.append(params)

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = " ".join(b.text for b in prompt if isinstance(b, TextContent)).strip()
        if text == "/url":
            flow = f"flow-{next(self.flows)}"
            answer = await session.ask_url("Sign in to continue", "https://example.com/sign-in", elicitation_id=flow)
            if answer.cancelled:
                return "cancelled"
            if answer.accepted:
                session.complete_elicitation(flow)
            await session.say(f"url: {answer.action}")
        elif text == "/call":
            result = await session.client.request("_test/hello", {"n": 1})
            await session.say(json.dumps(result, sort_keys=True))
        elif text in ("/call-missing", "/call-slow"):
            method, timeout = ("_test/missing", None) if text == "/call-missing" else ("_test/slow", 0.5)
            try:
                await session.client.request(method, {}, timeout=timeout)
            except RequestError as exc:
                await session.say(f"error {exc.code}")
            else:
                await session.say("no error")
        elif text == "/call-wait":
            await session.client.request("_test/slow", {})
            await session.say("answered")
        elif text == "/pings":
            with anyio.fail_after(PING_WAIT_S):  # a notification has no answer: wait until it was handled
                while not self.pings:
                    await anyio.sleep(0.01)
            await session.say(json.dumps(self.pings, sort_keys=True))
        elif text == "/meta":
            seen = {"session": session.meta, "prompt": session.prompt_meta, "blocks": [b.meta for b in prompt]}
            await session.say(json.dumps(seen, sort_keys=True), meta={"echo": session.prompt_meta})
        else:
            await session.say(text)
        return "end_turn"


if __name__ == "__main__":
    run_stdio(SurfaceAgent())
