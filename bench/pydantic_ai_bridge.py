"""The pydantic-ai bridge's overhead per streamed token and per turn, next to the plain ``Agent`` echo.

Three agents serve the bench workload over stdio, interleaved turn by turn (the order flips every round):

- ``acp-agent``: ``bench/agents/sdk_agent.py``, a plain ``Agent`` that streams the chunks itself (the anchor);
- ``pydantic-ai minimal``: ``bench/agents/pydantic_ai_agent.py`` with ``BENCH_PYDANTIC_AI=minimal``: pydantic-ai's
  ``run_stream_events`` on a streaming ``FunctionModel``, each text delta written by hand (pydantic-ai's own cost);
- ``PydanticAIAgent``: the same pydantic-ai agent behind the bridge (events as ACP updates, the history saved).

Measured: agent CPU per streamed token (``stream N``, utime+stime from ``/proc`` over N), and the wall time of
an ``echo`` turn as the client sees it (prompt sent to idle read). Each agent gets a fresh session per round, so
the bridge's history does not grow across rounds. Printed: medians and the ratio to ``acp-agent`` per round.

Run: ``.venv/bin/python bench/pydantic_ai_bridge.py [--tokens 20000] [--rounds 5] [--echoes 50]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import ROOT, AgentSpec, Peer, initialize_params, new_session_params  # bench/ is not a package
from stream_cpu import cpu_seconds

AGENTS = {
    "acp-agent": ([sys.executable, "bench/agents/sdk_agent.py"], {}),
    "pydantic-ai minimal": ([sys.executable, "bench/agents/pydantic_ai_agent.py"], {"BENCH_PYDANTIC_AI": "minimal"}),
    "PydanticAIAgent": ([sys.executable, "bench/agents/pydantic_ai_agent.py"], {"BENCH_PYDANTIC_AI": "bridge"}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--echoes", type=int, default=50)
    args = parser.parse_args()
    os.chdir(ROOT)
    os.environ["ACP_AGENT_DATA_DIR"] = tempfile.mkdtemp(prefix="acp-bench-pydantic-")
    os.environ["PYTHONPATH"] = str(ROOT)
    per_token: dict[str, list[float]] = {name: [] for name in AGENTS}
    per_turn: dict[str, list[float]] = {name: [] for name in AGENTS}
    peers: dict[str, Peer] = {}
    with tempfile.TemporaryFile() as stderr:
        try:
            for name, (argv, env) in AGENTS.items():
                os.environ.update(env)
                peers[name] = Peer(AgentSpec(name, name, argv, 2), stderr)
                peers[name].call("initialize", initialize_params(2))
            for round_ in range(args.rounds):
                order = list(peers.items()) if round_ % 2 == 0 else list(reversed(peers.items()))
                for name, peer in order:
                    session, _, _ = peer.call("session/new", new_session_params(2))
                    sid = session["sessionId"]
                    peer.prompt(sid, "stream 1000")  # warm-up
                    before = cpu_seconds(peer.pid)
                    _, messages, _, _ = peer.prompt(sid, f"stream {args.tokens}")
                    per_token[name].append((cpu_seconds(peer.pid) - before) / args.tokens * 1e6)
                    chunks = sum(1 for m in messages if m.get("params", {}).get("update", {}).get("sessionUpdate")
                                 == "agent_message_chunk")
                    assert chunks >= args.tokens, (name, chunks)
                    session, _, _ = peer.call("session/new", new_session_params(2))
                    sid = session["sessionId"]
                    turns = []
                    for _ in range(args.echoes):
                        _, _, sent, ended = peer.prompt(sid, "echo hello")
                        turns.append((ended - sent) * 1e3)
                    per_turn[name].append(statistics.median(turns))
        finally:
            for peer in peers.values():
                peer.close()
    anchor = "acp-agent"
    print(f"agent CPU per streamed token (stream {args.tokens}), µs, {args.rounds} rounds interleaved:")
    for name, values in per_token.items():
        ratio = statistics.median(v / a for v, a in zip(values, per_token[anchor], strict=True))
        print(f"  {name:<20} median {statistics.median(values):7.2f}  x{ratio:5.2f}  {[round(v, 1) for v in values]}")
    print(f"echo turn, wall ms (median of {args.echoes} per round), {args.rounds} rounds interleaved:")
    for name, values in per_turn.items():
        ratio = statistics.median(v / a for v, a in zip(values, per_turn[anchor], strict=True))
        print(f"  {name:<20} median {statistics.median(values):7.2f}  x{ratio:5.2f}  {[round(v, 2) for v in values]}")


if __name__ == "__main__":
    main()
