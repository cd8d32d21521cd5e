"""Start-up of two checkouts, interleaved: the answer to ``initialize``, then to ``session/new``, then a first prompt.

Run: ``.venv/bin/python bench/startup_ab.py BEFORE AFTER [--rounds 15] [--pause 0.3]`` (two checkout directories).

Each round spawns both checkouts' ``bench/agents/sdk_agent.py`` (each with its checkout on ``PYTHONPATH``, in
alternating order) and times, per agent: spawn -> ``initialize`` answered; ``session/new`` sent at once ->
answered (an editor sends both together: what start-up moves past ``initialize`` lands here); spawn ->
``session/new`` answered (the sum); after ``--pause`` seconds (the user typing), one echo prompt -> ``idle``.
Prints the medians and the median of the per-round AFTER / BEFORE ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab_echo import checkout_spec  # bench/ is not a package
from run import Peer, check_echo, initialize_params, new_session_params

FIGURES = ("initialize", "session/new", "spawn to session", "first prompt")


def one_agent(checkout: Path, pause: float) -> dict[str, float]:
    """Spawn one agent of ``checkout`` and time its start; figures in ms."""
    with tempfile.TemporaryFile() as err, tempfile.TemporaryDirectory() as data:
        spec = checkout_spec(checkout, data)
        peer = Peer(spec, err)
        try:
            _, _, initialized = peer.call("initialize", initialize_params(2))
            result, _, opened = peer.call("session/new", new_session_params(2))
            session_id = result["sessionId"]
            time.sleep(pause)
            end, messages, sent, ended = peer.prompt(session_id, "echo first")
            check_echo(spec, end, messages, session_id, "first")
        finally:
            peer.close()
        return {"initialize": (initialized - peer.spawned) * 1e3, "session/new": (opened - initialized) * 1e3,
                "spawn to session": (opened - peer.spawned) * 1e3, "first prompt": (ended - sent) * 1e3}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--pause", type=float, default=0.3)
    args = parser.parse_args()
    checkouts = [args.before.resolve(), args.after.resolve()]
    samples: list[list[dict[str, float]]] = [[], []]
    for round_index in range(args.rounds):
        order = [0, 1] if round_index % 2 == 0 else [1, 0]
        for k in order:
            samples[k].append(one_agent(checkouts[k], args.pause))
    print(f"{args.rounds} interleaved rounds; medians in ms (after / before: median of the per-round ratios)")
    print(f"{'figure':18} {'before':>9} {'after':>9} {'after/before':>13}")
    for figure in FIGURES:
        before = [s[figure] for s in samples[0]]
        after = [s[figure] for s in samples[1]]
        ratio = statistics.median(a / b for a, b in zip(after, before, strict=True))
        print(f"{figure:18} {statistics.median(before):9.1f} {statistics.median(after):9.1f} {ratio:12.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
