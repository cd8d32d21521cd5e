"""A hand-written minimal ACP v2 agent with the standard library only: the benchmark's anchor.

No framework: read lines from stdin, answer ``initialize``, ``session/new`` and ``session/prompt``
(``{messageId}``, the ``user_message`` echo, ``running``, the reply, ``idle`` ``end_turn``), write with
``sys.stdout.buffer`` and flush once per handled message. Same workload and the same wire bytes as
``sdk_agent.py``; ``raw_orjson_agent.py`` is this file with ``orjson`` in place of ``json``.

    stream N   -> N ``agent_message_chunk`` updates of one message, then end_turn
    echo TEXT  -> one complete ``agent_message`` with TEXT, then end_turn
"""

import json
import sys


def main() -> None:
    out = sys.stdout.buffer
    encode = json.JSONEncoder(separators=(",", ":")).encode
    counter = 0
    sessions: set[str] = set()

    def send(message: object) -> None:
        out.write(encode(message).encode() + b"\n")

    def update(session_id: str, body: dict[str, object]) -> None:
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": body}})

    for raw in sys.stdin.buffer:
        if not raw.strip():
            continue
        message = json.loads(raw)
        method = message.get("method")
        request_id = message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": 2,
                "info": {"name": "bench-raw-json-agent", "version": "1.0.0"},
                "capabilities": {"session": {}},
            }})
        elif method == "session/new":
            counter += 1
            session_id = f"sess_{counter}"
            sessions.add(session_id)
            send({"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": session_id}})
        elif method == "session/prompt" and params.get("sessionId") in sessions:
            session_id = params["sessionId"]
            prompt = params["prompt"]
            counter += 1
            user_id = f"msg_user_{counter}"
            send({"jsonrpc": "2.0", "id": request_id, "result": {"messageId": user_id}})
            update(session_id, {"sessionUpdate": "user_message", "messageId": user_id, "content": prompt})
            update(session_id, {"sessionUpdate": "state_update", "state": "running", "background": []})
            text = " ".join(block["text"] for block in prompt if block.get("type") == "text")
            command, _, argument = text.partition(" ")
            counter += 1
            reply_id = f"msg_{counter}"
            if command == "stream":
                for i in range(int(argument)):
                    update(session_id, {"sessionUpdate": "agent_message_chunk", "messageId": reply_id,
                                        "content": {"type": "text", "text": f"chunk {i} "}})
            else:
                reply = argument if command == "echo" else f"unknown command: {command}"
                update(session_id, {"sessionUpdate": "agent_message", "messageId": reply_id,
                                    "content": [{"type": "text", "text": reply}]})
            update(session_id, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn",
                                "background": []})
        elif method == "session/prompt":
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32002, "message": "Session not found"}})
        elif request_id is not None and method is not None:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})
        out.flush()


if __name__ == "__main__":
    main()
