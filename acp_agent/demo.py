"""``make demo``: drive the example agents over real pipes and print a readable timeline.

Usage: ``python -m acp_agent demo [--agent PATH] [--background-agent PATH]`` (``python -m acp_agent.demo``
still works). First a short
conversation with the echo agent, then background work with the background agent: a
background process, a watcher the client cancels with ``tool_call/cancel``, a wake-up
that fires after its turn ended, a subagent (a child session listed while it works), and a
background job whose permission request survives a ``session/cancel`` and is answered
afterwards. One line per message: time, direction (``→`` client to agent, ``←`` agent to
client), the method or update kind (``session/update @ID`` for a child session's own
updates), and the essentials of its content; each ``state_update`` shows its
``background`` list.
"""

from __future__ import annotations

import base64
import os
import runpy
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from .testing.client import Client, TranscriptEntry, spawn_agent

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


class Timeline:
    """Formats transcript entries as one line each."""

    def __init__(self) -> None:
        self._start: float | None = None
        self._methods: dict[tuple[str, Any], str] = {}
        self._children: set[str] = set()

    def __call__(self, entry: TranscriptEntry) -> None:
        if self._start is None:
            self._start = entry.at
        line = self.describe(entry)
        if line:
            print(f"{entry.at - self._start:7.3f}s  {line}", flush=True)

    def describe(self, entry: TranscriptEntry) -> str:
        """One line for one message."""
        msg = entry.message
        arrow = "→" if entry.direction == "client->agent" else "←"
        if isinstance(msg, list):
            return f"{arrow} batch of {len(msg)}"
        if not isinstance(msg, dict):
            return f"{arrow} {msg!r}"
        method = msg.get("method")
        if method is not None:
            if "id" in msg:
                self._methods[(entry.direction, msg["id"])] = method
            params = msg.get("params") or {}
            label = method
            if method == "session/update":
                update = params.get("update") or {}
                if update.get("sessionUpdate") == "subagent_update":
                    self._children.add(str(update.get("sessionId")))
                if params.get("sessionId") in self._children:
                    label = f"{method} @{params['sessionId']}"  # a child session's own update
            return f"{arrow} {label:<28} {_params(method, params)}"
        sender = "agent->client" if entry.direction == "client->agent" else "client->agent"
        asked = self._methods.pop((sender, msg.get("id")), "?")
        if "error" in msg:
            err = msg["error"]
            return f"{arrow} {asked + ' (error)':<28} {err.get('code')} {err.get('message')}"
        return f"{arrow} {asked + ' (result)':<28} {_result(asked, msg.get('result') or {})}"


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(_text(c) for c in content)
    if isinstance(content, dict):
        if content.get("type") == "text":
            return str(content.get("text", ""))
        return f"[{content.get('type')}]"
    return ""


def _short(text: str, limit: int = 60) -> str:
    text = text.replace("\n", "⏎")
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _params(method: str, params: dict[str, Any]) -> str:
    if method == "session/update":
        update = params.get("update") or {}
        kind = update.get("sessionUpdate", "?")
        if kind == "state_update":
            extra = f"stopReason={update['stopReason']}" if update.get("stopReason") else ""
            if "background" in update:
                extra += f" background={_background(update['background'])}"
            return f"{kind:<23} {update.get('state')} {extra}".rstrip()
        if "content" in update and "messageId" in update:
            return f"{kind:<23} {update['messageId']} {_short(_text(update['content']))}"
        if kind == "subagent_update":
            return f"{kind:<23} {update.get('sessionId')} {_subagent(update)}".rstrip()
        ident = next((update[k] for k in ("toolCallId", "terminalId", "planId") if k in update), "")
        return f"{kind:<23} {ident} {_details(update)}".rstrip()
    if method == "session/request_permission":
        subject = params.get("subject") or {}
        about = (subject.get("toolCall") or {}).get("toolCallId") or subject.get("terminalId") or "-"
        options = ",".join(str(o.get("optionId")) for o in params.get("options") or [])
        return f"{params.get('sessionId')} {_short(str(params.get('title', '')), 40)} about={about} [{options}]"
    if method == "initialize":
        return f"protocolVersion={params.get('protocolVersion')}"
    if method == "session/prompt":
        return f"{params.get('sessionId')} {_short(_text(params.get('prompt')))}"
    if method == "session/new":
        return f"cwd={params.get('cwd')}"
    return " ".join(f"{k}={v}" for k, v in params.items() if k != "_meta")


def _subagent(update: dict[str, Any]) -> str:
    """The essentials of a ``subagent_update``: title, capabilities, the child's mirrored state."""
    parts = []
    if update.get("title"):
        parts.append(_short(update["title"], 40))
    if update.get("capabilities"):
        parts.append("(cancellable)")
    state = update.get("state")
    if isinstance(state, dict):
        stop = f" stopReason={state['stopReason']}" if state.get("stopReason") else ""
        parts.append(f"state={state.get('state')}{stop} background={_background(state.get('background'))}")
    return " ".join(parts)


def _background(items: Any) -> str:
    """``[term_4, call_7]``: the ids of a ``background`` list."""
    if not isinstance(items, list):
        return repr(items)
    ids = (i.get("terminalId") or i.get("toolCallId") or i.get("sessionId") or i.get("type") for i in items)
    return f"[{', '.join(map(str, ids))}]"


def _details(update: dict[str, Any]) -> str:
    """The essentials of a tool call or terminal update."""
    parts = []
    if update.get("title"):
        parts.append(_short(update["title"], 40))
    if update.get("status"):
        parts.append(str(update["status"]))
    if update.get("command"):
        parts.append(f"$ {update['command']}")
    if update.get("exitStatus") is not None:
        exit_status = update["exitStatus"]
        parts.append(f"exited signal={exit_status['signal']}" if exit_status.get("signal")
                     else f"exited code={exit_status.get('exitCode')}")
    if update.get("capabilities"):
        parts.append("(cancellable)")
    if "data" in update:  # terminal output
        parts.append(_short(base64.b64decode(update["data"]).decode("utf-8", "replace")))
    content = update.get("content")
    if isinstance(content, dict) and content.get("type") == "content":  # one tool call content item
        parts.append(_short(_text(content.get("content"))))
    elif isinstance(content, dict):
        parts.append(f"[{content.get('type')} {content['terminalId']}]" if "terminalId" in content
                     else f"[{content.get('type')}]")
    return " ".join(parts)


def _result(method: str, result: dict[str, Any]) -> str:
    if method == "session/request_permission":
        outcome = result.get("outcome") or {}
        return " ".join(str(outcome[k]) for k in ("outcome", "optionId") if k in outcome)
    if method == "initialize":
        info = result.get("info") or {}
        return f"protocolVersion={result.get('protocolVersion')} agent={info.get('name')} {info.get('version')}"
    return " ".join(f"{k}={v}" for k, v in result.items()) or "{}"


async def run_demo(echo_agent: Path, background_agent: Path) -> int:
    """Run both scripted conversations; 0 if both agents exited with status 0."""
    ok = await _run(echo_agent, _conversation)
    print(flush=True)
    # The background conversation answers its permission request by hand (after a session/cancel).
    ok = await _run(background_agent, _background_work, permission_policy=None) and ok
    return 0 if ok else 1


async def _run(agent_path: Path, conversation: Callable[[Client], Awaitable[None]], **client_options: Any) -> bool:
    timeline = Timeline()
    print(f"acp-agent demo: launching {agent_path.name} over stdio\n", flush=True)
    async with spawn_agent([sys.executable, str(agent_path)], on_message=timeline, **client_options) as client:
        await conversation(client)
    print(f"\nagent exited with status {client.returncode}", flush=True)
    return client.returncode == 0


async def _conversation(client: Client) -> None:
    await client.initialize()
    session_id = await client.new_session(os.getcwd())
    await client.prompt_and_wait(session_id, "Hello, ACP v2!")
    await client.prompt_and_wait(
        session_id,
        [
            {"type": "text", "text": "Echo this too"},
            {"type": "resource_link", "name": "README.md", "uri": f"file://{os.getcwd()}/README.md"},
        ],
    )
    await client.close_session(session_id)


async def _background_work(client: Client) -> None:
    await client.initialize()
    session_id = await client.new_session(os.getcwd())
    # A process that outlives its turn: listed as its terminal until it exits.
    await client.prompt_and_wait(session_id, "/bg for i in 1 2 3; do echo tick $i; sleep 0.3; done")
    # A watcher (a tool call with no process), stopped by the client after a while.
    view = await client.prompt_and_wait(session_id, "/watch 5")
    watcher = next(u["toolCallId"] for u in view.updates if u.get("title") == "Watch")
    await anyio.sleep(1.5)
    await client.request("tool_call/cancel", {"sessionId": session_id, "toolCallId": watcher})
    # A wake-up: pending and listed after its turn, then it completes and starts new work by itself.
    await client.prompt_and_wait(session_id, "/schedule 1 Good morning! The wake-up fired.")
    view = await client.wait_idle(session_id, count=4)  # the wake-up's work is the 4th to end
    # A subagent: a child session that streams its message for a second; the parent lists it meanwhile.
    await client.prompt_and_wait(session_id, "/subagent 1 Exploring the auth module")
    child = next(u["sessionId"] for u in reversed(view.updates) if u.get("sessionUpdate") == "subagent_update")
    await client.wait_idle(child)
    await client.wait_for(lambda: view.background == [])
    # A background job asks permission: session/cancel leaves its request open; the answer comes later.
    await client.prompt_and_wait(session_id, "/bgask")
    await client.wait_for(lambda: bool(client.pending_permissions))
    client.cancel(session_id)
    await anyio.sleep(0.5)  # nothing is withdrawn: the request is for listed background work
    client.answer_permission(next(iter(client.pending_permissions)), "allow-once")
    await client.wait_for(lambda: view.background == [])
    await client.close_session(session_id)


def run(agent: Path | None = None, background_agent: Path | None = None) -> int:
    """Entry point of ``python -m acp_agent demo`` (parsed by `acp_agent.cli`): the demo's exit status."""
    return anyio.run(run_demo, Path(agent) if agent else EXAMPLES / "echo_agent.py",
                     Path(background_agent) if background_agent else EXAMPLES / "background_agent.py")


if __name__ == "__main__":  # the older spelling of ``python -m acp_agent demo``
    sys.argv[1:1] = ["demo"]
    runpy.run_module("acp_agent", run_name="__main__", alter_sys=True)
