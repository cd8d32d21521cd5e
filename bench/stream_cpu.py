"""Agent CPU per streamed chunk, several agents interleaved turn by turn (steadier than one long run on a busy machine).

Run: ``.venv/bin/python bench/stream_cpu.py [--chunks 200000] [--turns 7] NAME=COMMAND ...`` where each COMMAND
starts a bench agent (``bench/agents/``), for example::

    .venv/bin/python bench/stream_cpu.py \\
        "acp-agent=env PYTHONPATH=. .venv/bin/python bench/agents/sdk_agent.py" \\
        "raw-orjson=.venv/bin/python bench/agents/raw_orjson_agent.py"

Every agent is started once, initialized, given a session and a warm-up ``stream 2000``; then each runs
``--turns`` prompts ``stream N``, the agents taking turns (the order flips every round, so a load spike hits
them alike). Per turn: the agent's utime+stime (``/proc/<pid>/stat``, all threads; 10 ms ticks) over N. Printed:
each agent's median and per-turn values, and the median over rounds of its ratio to the last agent named
(measured in the same round).
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


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all threads), in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("agents", nargs="+", metavar="NAME=COMMAND")
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--turns", type=int, default=7)
    args = parser.parse_args()
    os.chdir(ROOT)
    named = [agent.split("=", 1) for agent in args.agents]
    peers: dict[str, tuple[Peer, str]] = {}
    with tempfile.TemporaryFile() as stderr:
        try:
            for name, command in named:
                peer = Peer(AgentSpec(name, name, command.split(), 2), stderr)
                peer.call("initialize", initialize_params(2))
                session, _, _ = peer.call("session/new", new_session_params(2))
                peer.prompt(session["sessionId"], "stream 2000")
                peers[name] = (peer, session["sessionId"])
            per_turn: dict[str, list[float]] = {name: [] for name in peers}
            for round_ in range(args.turns):
                order = list(peers.items()) if round_ % 2 == 0 else list(reversed(peers.items()))
                for name, (peer, session_id) in order:
                    before = cpu_seconds(peer.pid)
                    peer.prompt(session_id, f"stream {args.chunks}")
                    per_turn[name].append((cpu_seconds(peer.pid) - before) / args.chunks * 1e6)
        finally:
            for peer, _ in peers.values():
                peer.close()
    anchor = named[-1][0]
    print(f"agent CPU per chunk, stream {args.chunks} x {args.turns} turns, interleaved (µs; ratio: median per round "
          f"to {anchor})")
    for name, values in per_turn.items():
        ratio = statistics.median(v / a for v, a in zip(values, per_turn[anchor], strict=True))
        print(f"  {name:<24} median {statistics.median(values):5.2f}  ratio {ratio:4.2f}x  "
              f"turns {[round(v, 2) for v in values]}")


if __name__ == "__main__":
    main()
