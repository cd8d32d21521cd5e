"""Echo turns of two checkouts in lockstep: an A/B that holds up on a shared, loaded machine.

Run: ``.venv/bin/python bench/ab_echo.py BEFORE AFTER [--turns 2000] [--reps 3] [--block 1]`` (two checkout
directories).

Both checkouts' ``bench/agents/sdk_agent.py`` run side by side (each with its checkout on ``PYTHONPATH``); after
a warm-up, echo prompts alternate between them one turn at a time (the order flips every turn), so a load
spike hits both alike; ``--block N`` has each serve N turns back to back instead, the first of each block (the
cold one) left out. Per repetition it prints each agent's p50 round trip and its CPU (utime+stime from
``/proc``) per turn, then the median over repetitions of the AFTER / BEFORE ratios. ``bench/run.py
--baseline`` gives the full table; its agents run seconds to minutes apart, so on a busy machine its before/after
difference can drown in the load changing between rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import AgentSpec, Peer, lockstep  # bench/ is not a package


def checkout_spec(checkout: Path, data_dir: str) -> AgentSpec:
    """``bench/agents/sdk_agent.py`` of ``checkout``, run with that checkout on ``PYTHONPATH`` and its sessions in
    ``data_dir``."""
    return AgentSpec(str(checkout), str(checkout), ["env", f"PYTHONPATH={checkout}", f"ACP_AGENT_DATA_DIR={data_dir}",
                                                    sys.executable, str(checkout / "bench/agents/sdk_agent.py")], 2)


def repetition(checkouts: list[Path], turns: int, block: int = 1) -> list[tuple[float, float]]:
    """One side-by-side run; (p50 ms, CPU ms per turn) per checkout."""
    with (tempfile.TemporaryFile() as err_a, tempfile.TemporaryFile() as err_b,
          tempfile.TemporaryDirectory() as data_a, tempfile.TemporaryDirectory() as data_b):
        # Each agent keeps its sessions in a file of its own: one shared file would make their saves wait
        # for each other's write lock.
        peers = [Peer(checkout_spec(c, data), err)
                 for c, err, data in zip(checkouts, (err_a, err_b), (data_a, data_b), strict=True)]
        return lockstep(peers, turns, block)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--block", type=int, default=1,
                        help="turns each agent serves back to back before the other takes over, the first of "
                             "each block left out (default 1: one turn each, all timed)")
    args = parser.parse_args()
    checkouts = [args.before.resolve(), args.after.resolve()]
    p50_ratios, cpu_ratios = [], []
    for rep in range(args.reps):
        (p50_a, cpu_a), (p50_b, cpu_b) = repetition(checkouts, args.turns, args.block)
        p50_ratios.append(p50_b / p50_a)
        cpu_ratios.append(cpu_b / cpu_a)
        print(f"rep {rep + 1}: before p50 {p50_a:.3f} ms, CPU {cpu_a:.3f} ms/turn; "
              f"after p50 {p50_b:.3f} ms, CPU {cpu_b:.3f} ms/turn", flush=True)
    print(f"after / before (median of {args.reps}): p50 {statistics.median(p50_ratios):.3f}x, "
          f"CPU per turn {statistics.median(cpu_ratios):.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
