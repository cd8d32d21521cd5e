"""A deliberately broken ACP agent, written without the SDK, for the inspector's tests.

It answers ``initialize``, ``session/new`` and ``session/prompt`` correctly enough to chat, but on
a prompt it also breaks the wire: it writes a line that is not JSON on stdout, sends a notification
of an unknown method without the ``_`` prefix (rule R84), and a ``tool_call_update`` without its
``toolCallId`` (a schema error). The prompt ``crash`` makes it write to stderr and exit with status 3
in the middle of the turn. The prompt ``show`` is answered correctly, with a thought, a plan, a tool call
showing a diff and the turn's usage (what the page renders); ``where`` names its working directory and
``$ACP_DEV_TEST``.
"""

from __future__ import annotations

import json
import os
import sys


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def update(session: str, body: dict[str, object]) -> None:
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": body}})


def show(session: str, message_id: str) -> None:
    """A well-formed turn with the richer kinds of update."""
    update(session, {"sessionUpdate": "agent_thought_chunk", "messageId": f"{message_id}_t",
                     "content": {"type": "text", "text": "thinking about the change"}})
    update(session, {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "plan_1", "entries": [
        {"content": "read the file", "priority": "high", "status": "completed"},
        {"content": "edit the file", "priority": "medium", "status": "in_progress"}]}})
    patch = "--- a/tmp/app.py\n+++ b/tmp/app.py\n@@ -1 +1 @@\n-print('old')\n+print('new')\n"
    update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "title": "edit app.py",
                     "kind": "edit", "status": "completed", "content": [{
                         "type": "diff", "changes": [{"operation": "modify", "path": "/tmp/app.py"}],
                         "patch": {"format": "git_patch", "text": patch}}]})
    update(session, {"sessionUpdate": "agent_message_chunk", "messageId": message_id,
                     "content": {"type": "text", "text": "edited app.py"}})
    update(session, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn", "background": [],
                     "usage": {"totalTokens": 120, "inputTokens": 100, "outputTokens": 20}})


def main() -> None:
    turns = 0
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": request_id,
                  "result": {"protocolVersion": 2, "info": {"name": "broken-agent", "version": "0"}}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": "sess_broken"}})
            update("sess_broken", {"sessionUpdate": "state_update", "state": "idle", "background": []})
        elif method == "session/prompt":
            turns += 1
            session = params["sessionId"]
            text = "".join(block.get("text", "") for block in params.get("prompt", []))
            message_id = f"msg_{turns}"
            send({"jsonrpc": "2.0", "id": request_id, "result": {"messageId": f"user_{turns}"}})
            update(session, {"sessionUpdate": "user_message", "messageId": f"user_{turns}",
                             "content": params.get("prompt", [])})
            update(session, {"sessionUpdate": "state_update", "state": "running", "background": []})
            if text == "crash":
                update(session, {"sessionUpdate": "agent_message_chunk", "messageId": message_id,
                                 "content": {"type": "text", "text": "about to crash"}})
                sys.stderr.write("broken agent: boom, crashing mid-turn\n")
                sys.stderr.flush()
                os._exit(3)
            if text == "show":
                show(session, message_id)
                continue
            if text == "where":  # a correct turn naming its working directory and $ACP_DEV_TEST
                update(session, {"sessionUpdate": "agent_message_chunk", "messageId": message_id, "content": {
                    "type": "text", "text": f"cwd={os.getcwd()} env={os.environ.get('ACP_DEV_TEST')}"}})
                update(session, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn",
                                 "background": []})
                continue
            sys.stdout.write("this line is not JSON\n")
            send({"jsonrpc": "2.0", "method": "oops/unknown", "params": {"marker": "R84 here"}})
            update(session, {"sessionUpdate": "tool_call_update", "status": "in_progress"})
            update(session, {"sessionUpdate": "agent_message_chunk", "messageId": message_id,
                             "content": {"type": "text", "text": f"broken echo: {text}"}})
            update(session, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn",
                             "background": []})
        elif request_id is not None and method is not None:
            send({"jsonrpc": "2.0", "id": request_id,
                  "error": {"code": -32601, "message": "Method not found", "data": {"method": method}}})


if __name__ == "__main__":
    main()
