"""Echo turns of acp-agent and the two official SDKs in lockstep: their round trips compared under equal load.

Run: ``.venv/bin/python bench/lockstep_sdks.py [--turns 2000] [--reps 5]`` (after ``make bench`` set up
``bench/.venv-anchors`` and ``bench/node_modules``).

The bench agents of this checkout, the official Python SDK and the TypeScript SDK run side by side; after a
warm-up, echo prompts go to each in turn (the order rotates every pass: ``0 1 2``, ``1 2 0``, ``2 0 1``, so no
agent answers twice in a row), so a load spike hits all three alike.
Per repetition it prints each agent's p50 round trip and its CPU (utime+stime from ``/proc``) per turn, then
the medians over repetitions and the median per-repetition ratio of acp-agent to each SDK. Each agent sleeps
while the others answer, so every turn starts from a cold cache: the figures are higher than
``bench/run.py``'s back-to-back turns, the ratios hold up on a loaded machine. ``--block N`` has each agent
serve N turns back to back (the first of each block, the cold one, left out): ``bench/run.py``'s warm turns,
still interleaved.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import ANCHORS_PYTHON, agent_specs, lockstep_agents  # bench/ is not a package

AGENTS = ("acp-agent", "official-py", "ts-sdk")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--block", type=int, default=1,
                        help="turns each agent serves back to back, the first of each left out (default 1: "
                             "one turn each, every turn cold)")
    args = parser.parse_args()
    node = shutil.which("node") or "node"
    specs = [s for s in agent_specs(sys.executable, str(ANCHORS_PYTHON), node) if s.key in AGENTS]
    results: list[list[tuple[float, float]]] = []
    for rep in range(args.reps):
        results.append(list(lockstep_agents(specs, args.turns, args.block).values()))
        print(f"rep {rep + 1}: " + "; ".join(
            f"{s.key} p50 {p50:.3f} ms, CPU {cpu:.3f} ms/turn" for s, (p50, cpu) in zip(specs, results[-1], strict=True)
        ), flush=True)
    for k, spec in enumerate(specs):
        p50 = statistics.median(r[k][0] for r in results)
        cpu = statistics.median(r[k][1] for r in results)
        line = f"{spec.label}: p50 {p50:.3f} ms, CPU {cpu:.3f} ms/turn"
        if k:
            line += f"; acp-agent / this: p50 {statistics.median(r[0][0] / r[k][0] for r in results):.3f}x"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
