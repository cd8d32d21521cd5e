"""Where acp-agent's start-up and memory go, stage by stage, next to the dependency floor.

Each stage is a fresh interpreter (``.venv/bin/python -c ...``) that does a little more than the one
before; the stages run interleaved, ``--rounds`` times, and the table gives medians of wall time, CPU
time (user+sys) and peak RSS, with each stage's difference to the floor. The machine's noise hits
every stage alike, so read the differences (and their ratio to the floor), not the absolute times.

- ``floor``: ``import anyio, jsonrpcserver, pydantic`` and one model: the dependency floor of
  ``make bench`` (``bench/agents/deps_floor_agent.py`` does this, then serves with a blocking loop);
- ``+ asyncio only``: the floor, then ``asyncio.run`` of an empty coroutine (any event loop's start);
- ``+ anyio running``: the floor, then ``anyio.run`` of what every anyio agent runs before it can answer
  (a task group, an event, a signal receiver, a shielded checkpoint): anyio imports its backend lazily,
  so the floor agent, which never runs a loop, does not pay for it;
- ``+ initialize's models``, ``+ those, built``: the floor with anyio running, then only the wire models
  ``initialize`` needs (``acp_agent/schema/initialize.py`` and the modules it imports), then one
  ``initialize`` validated and answered with them: the least any agent that validates ``initialize``
  with these models pays before its answer;
- ``+ wire models``: the floor with anyio running, then the wire models of ``acp_agent.schema`` (class creation only:
  validators are built on first use);
- ``+ initialize built``: the above, then one ``initialize`` request validated and answered (the
  validators and serializers of those models are built here);
- ``+ a session's models, built``: ``+ initialize built``, then what one session of the bench workloads
  (stream and echo) puts through the wire models: ``session/new`` validated and answered, a text
  ``session/prompt`` validated and answered, and its ``session/update`` notifications (``user_message``,
  ``state_update`` running and idle, ``agent_message``, ``agent_message_chunk``) serialized. No acp-agent
  runtime: the least memory any agent that checks this traffic with these pydantic models holds, next to the
  ``+ 4 MB`` goal of issue 16;
- ``import acp_agent``: the floor and the whole package as an agent imports it (no loop running);
- ``acp_agent, initialize``: ``import acp_agent``, then the ``initialize`` work as above, in a loop;
- ``acp_agent, a session's models``: that, then the session's traffic as in ``+ a session's models, built``.

The ``x floor`` column is the stage's median wall time over the floor's: ``+ those, built`` is the least
start-up an anyio agent that validates ``initialize`` with pydantic models can have.

Run: ``.venv/bin/python bench/startup_parts.py [--rounds 9]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FLOOR = """
import anyio, jsonrpcserver, pydantic
class _Loaded(pydantic.BaseModel):
    value: int = 0
"""

LOOP = """
import signal
async def _main():
    async with anyio.create_task_group() as tg:
        event = anyio.Event()
        event.set()
        with anyio.open_signal_receiver(signal.SIGTERM):
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0)
        tg.cancel_scope.cancel()
anyio.run(_main)
"""

ASYNCIO = """
import asyncio
async def _nothing():
    pass
asyncio.run(_nothing())
"""

# The wire models without the rest of the package: a bare package object, so acp_agent/__init__.py
# (which imports everything) does not run.
MODELS = f"""
import sys, types
_pkg = types.ModuleType("acp_agent")
_pkg.__path__ = [{str(ROOT / "acp_agent")!r}]
sys.modules["acp_agent"] = _pkg
import acp_agent.schema as schema
"""

# Only the modules ``initialize`` itself needs (acp_agent/schema/initialize.py and what it imports), with a
# bare ``acp_agent.schema`` package too: the least any design that validates ``initialize`` with these
# models must create before answering.
INITIALIZE_MODELS = f"""
import sys, types
for _name in ("acp_agent", "acp_agent.schema"):
    _pkg = types.ModuleType(_name)
    _pkg.__path__ = [{str(ROOT)!r} + "/" + _name.replace(".", "/")]
    sys.modules[_name] = _pkg
import acp_agent.schema.initialize
schema = types.SimpleNamespace(**{{name: value for module in ("base", "capabilities", "initialize")
                                  for name, value in vars(sys.modules["acp_agent.schema." + module]).items()}})
"""

INITIALIZE = """
_params = {"protocolVersion": 2, "info": {"name": "bench-client", "version": "1.0"},
           "capabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}}
_request = schema.InitializeRequest.model_validate(_params, strict=True)
_answer = schema.InitializeResponse(protocol_version=2, capabilities=schema.AgentCapabilities(),
                                    info=schema.Implementation(name="bench", version="1.0"))
schema.to_json(_answer)
"""

SESSION = """
schema.NewSessionRequest.model_validate({"cwd": "/tmp"}, strict=True)
schema.to_json(schema.NewSessionResponse(session_id="sess_1"))
schema.PromptRequest.model_validate({"sessionId": "sess_1", "prompt": [{"type": "text", "text": "echo hi"}]},
                                    strict=True)
schema.to_json(schema.PromptResponse(message_id="msg_1"))
for _update in (schema.UserMessage(message_id="msg_1", content=[schema.TextContent(text="echo hi")]),
                schema.RunningStateUpdate(background=[]),
                schema.AgentMessage(message_id="msg_2", content=[schema.TextContent(text="hi")]),
                schema.AgentMessageChunk(message_id="msg_2", content=schema.TextContent(text="hi")),
                schema.IdleStateUpdate(stop_reason="end_turn", background=[])):
    schema.to_json(schema.UpdateSessionNotification(session_id="sess_1", update=_update))
"""

PACKAGE = """
import acp_agent
import acp_agent.schema as schema
"""

REPORT = """
import resource, sys
print(sum(1 for m in list(sys.modules.values())
          for v in list(vars(m).values()) if isinstance(v, type) and issubclass(v, pydantic.BaseModel)
          and v.__module__ == getattr(m, "__name__", None) and v.__module__.startswith("acp_agent")))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

STAGES: list[tuple[str, str]] = [
    ("floor", FLOOR),
    ("+ asyncio only", FLOOR + ASYNCIO),
    ("+ anyio running", FLOOR + LOOP),
    ("+ initialize's models", FLOOR + LOOP + INITIALIZE_MODELS),
    ("+ those, built", FLOOR + LOOP + INITIALIZE_MODELS + INITIALIZE),
    ("+ wire models", FLOOR + LOOP + MODELS),
    ("+ initialize built", FLOOR + LOOP + MODELS + INITIALIZE),
    ("+ a session's models, built", FLOOR + LOOP + MODELS + INITIALIZE + SESSION),
    ("import acp_agent", FLOOR + PACKAGE),
    ("acp_agent, initialize", FLOOR + PACKAGE + LOOP + INITIALIZE),
    ("acp_agent, a session's models", FLOOR + PACKAGE + LOOP + INITIALIZE + SESSION),
]


def sample(code: str) -> tuple[float, float, float, float]:
    """Wall ms, CPU ms (user+sys), peak RSS MB and acp_agent model classes of one fresh interpreter running ``code``."""
    import os
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(ROOT)
    before = os.times()
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code + REPORT], check=True, capture_output=True, text=True,
                         env=env, cwd=ROOT).stdout
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    classes, rss_kb = out.split()[-2:]
    return wall * 1e3, cpu * 1e3, int(rss_kb) * 1024 / 1e6, float(classes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9, help="samples per stage, interleaved (default 9)")
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name, _ in STAGES}
    for _, code in STAGES:  # warm the .pyc files and the page cache
        sample(code)
    for round_index in range(args.rounds):
        order = STAGES if round_index % 2 == 0 else STAGES[::-1]
        for name, code in order:
            results[name].append(sample(code))
    floor = [statistics.median(values) for values in zip(*results["floor"], strict=True)]
    print(f"{args.rounds} interleaved samples per stage; medians (difference to the floor)")
    print(f"{'stage':<30} {'wall ms':>16} {'x floor':>8} {'CPU ms':>16} {'peak RSS MB':>16} {'model classes':>14}")
    for name, _ in STAGES:
        medians = [statistics.median(values) for values in zip(*results[name], strict=True)]
        cells = [f"{m:7.1f} ({m - f:+6.1f})" for m, f in zip(medians[:3], floor[:3], strict=True)]
        ratio = f"{medians[0] / floor[0]:.2f}x"
        print(f"{name:<30} {cells[0]:>16} {ratio:>8} {cells[1]:>16} {cells[2]:>16} {medians[3]:>14.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
