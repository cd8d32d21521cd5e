"""Two parts of an echo turn, timed in-process (steadier than the round trip on a shared machine).

Run: ``PYTHONPATH=CHECKOUT .venv/bin/python bench/echo_parts.py [--turns 20000] [--rounds 5]``, once per
checkout to compare (interleave the runs). Prints the best round, in µs per turn:

- ``state``: the turn's two ``state_update`` snapshots (``running``, then ``idle`` ``end_turn``), framed and
  queued to a writer that drops them;
- ``history``: recording the turn's ``user_message`` and ``agent_message`` into a history a store tracks,
  then what the end-of-turn save does before its SQL: take the changes and encode each changed item.
"""

from __future__ import annotations

import argparse
import time

from acp_agent._session.registry import BackgroundRegistry
from acp_agent._session.sink import SessionSink
from acp_agent._session.snapshots import StatePublisher
from acp_agent.history import History
from acp_agent.schema import AgentMessage, TextContent, UserMessage


class _Drop:
    """A writer that drops what it is given."""

    def send_nowait(self, data: bytes) -> None:
        del data


def state_turns(turns: int) -> float:
    publisher = StatePublisher(BackgroundRegistry(), SessionSink(_Drop(), "sess_1", History()))  # type: ignore[arg-type]
    start = time.perf_counter()
    for _ in range(turns):
        publisher.set("running")
        publisher.set("idle", "end_turn")
    return (time.perf_counter() - start) / turns


def history_turns(turns: int) -> float:
    messages = [(UserMessage(message_id=f"msg_u{i}", content=[TextContent(text=f"ping {i}")]),
                 AgentMessage(message_id=f"msg_a{i}", content=[TextContent(text=f"ping {i}")])) for i in range(turns)]
    history = History()
    history.take_changes()  # tracked from here on, as once a store saved it
    start = time.perf_counter()
    for user, agent in messages:
        history.record(user)
        history.record(agent)
        history.take_changes().encoded_entries()
    return (time.perf_counter() - start) / turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    best = {"state": min(state_turns(args.turns) for _ in range(args.rounds)),
            "history": min(history_turns(args.turns) for _ in range(args.rounds))}
    print("  ".join(f"{name} {seconds * 1e6:.1f} us/turn" for name, seconds in best.items()))


if __name__ == "__main__":
    main()
