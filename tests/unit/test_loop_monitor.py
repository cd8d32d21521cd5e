"""The event-loop monitor: one warning naming the author's function per blocking episode.

Blocks last 0.8-1.5 s against thresholds of 0.3-0.5 s, so that a loaded 2-core machine does
not turn a quiet loop into a report or a report into silence.
"""

from __future__ import annotations

import logging
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from acp_agent import Agent, ContentBlock, EnvironmentVariableError, Session, StopReason, TextContent
from acp_agent._util import environment
from acp_agent._util.loop_monitor import (
    BLOCK_WARNING_ENV,
    DEFAULT_THRESHOLD,
    THREAD_NAME,
    BlockReport,
    Frame,
    _blame,
    _is_waiting_for_events,
    _resolve_threshold,
    monitor_event_loop,
    watch_event_loop,
)
from acp_agent.testing import client as testing_client
from acp_agent.testing.client import connect_agent

ROOT = Path(__file__).resolve().parents[2]
LOGGER = "acp_agent._util.loop_monitor"


def monitor_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME and t.is_alive()]


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]


def seconds_in(record: logging.LogRecord) -> float:
    match = re.search(r"blocked for ([0-9.]+) s", record.getMessage())
    assert match, record.getMessage()
    return float(match.group(1))


async def slow_hook(seconds: float) -> None:
    time.sleep(seconds)  # the mistake under test: a blocking call in async code


async def waiting_hook(seconds: float) -> None:
    threading.Event().wait(seconds)  # blocks inside the standard library (threading.py)


async def busy_hook(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:  # pure-Python work: the GIL changes hands, the loop does not run
        pass


async def subprocess_hook(seconds: float) -> None:
    subprocess.run(["sleep", str(seconds)], capture_output=True, check=True)  # waits in selectors.py


# -- in the event loop (both backends) -----------------------------------------------


@pytest.mark.anyio
async def test_a_blocking_call_gives_one_warning_naming_it(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    async with monitor_event_loop(threshold=0.3):
        assert len(monitor_threads()) == 1
        await anyio.sleep(0.3)
        await slow_hook(1.5)
        await anyio.sleep(0.5)  # several more beats: still one warning
    records = warnings_of(caplog)
    assert len(records) == 1, [r.getMessage() for r in records]
    message = records[0].getMessage()
    assert "slow_hook (tests/unit/test_loop_monitor.py:" in message
    assert "anyio.to_thread.run_sync" in message
    assert 1.0 <= seconds_in(records[0]) < 5.0
    report = getattr(records[0], "block_report", None)  # the structured report rides on the record
    assert isinstance(report, BlockReport) and report.location is not None
    assert report.location.function == "slow_hook" and report.samples >= 1
    assert report.stack[-1] == report.location  # time.sleep is C: the hook is the innermost frame
    assert not monitor_threads()


@pytest.mark.anyio
@pytest.mark.parametrize("hook", [waiting_hook, busy_hook, subprocess_hook], ids=lambda h: h.__name__)
async def test_the_authors_frame_is_named_not_the_library_frame_inside(hook: object) -> None:
    reports: list[BlockReport] = []
    async with monitor_event_loop(threshold=0.3, on_block=reports.append):
        await anyio.sleep(0.2)
        await hook(0.9)  # type: ignore[operator]
        await anyio.sleep(0.3)
    assert len(reports) == 1, reports
    report = reports[0]
    assert report.location is not None and report.location.function == hook.__name__  # type: ignore[attr-defined]
    assert report.location.filename == __file__
    assert report.duration >= 0.6
    if hook is not busy_hook:  # the call it waits in is in the standard library
        assert report.innermost is not None and report.innermost != report.location


def backtrack(n: int) -> None:
    re.match(r"(a+)+$", "a" * n + "b")  # exponential in n, all in C: the GIL is kept throughout


@pytest.mark.anyio
async def test_a_call_that_keeps_the_gil_is_not_taken_for_a_paused_process() -> None:
    n, took = 16, 0.0
    while took < 0.05:  # calibrate: each n more doubles the time
        n += 1
        start = time.perf_counter()
        backtrack(n)
        took = time.perf_counter() - start
    n += math.ceil(math.log2(1.2 / took))  # about 1.2 s

    async def gil_hook() -> None:
        backtrack(n)

    reports: list[BlockReport] = []
    async with monitor_event_loop(threshold=0.3, on_block=reports.append):
        await anyio.sleep(0.2)
        start, cpu = time.perf_counter(), time.process_time()
        await gil_hook()
        took, cpu = time.perf_counter() - start, time.process_time() - cpu
        await anyio.sleep(0.3)
    assert took >= 0.6, took
    if cpu < took / 2:
        pytest.skip(f"the machine is too loaded: {cpu:.2f} s of CPU in {took:.2f} s")
    assert len(reports) == 1, reports
    assert reports[0].duration >= took / 2
    assert reports[0].location is None or reports[0].location.function == "backtrack"  # sampled as it returned


@pytest.mark.anyio
async def test_a_loop_that_awaits_gives_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)

    async def chatty() -> None:  # many short steps keep the loop busy but responsive
        while True:
            for _ in range(50):
                await anyio.lowlevel.checkpoint()
            time.sleep(0.01)

    async with monitor_event_loop(threshold=DEFAULT_THRESHOLD), anyio.create_task_group() as tg:
        tg.start_soon(chatty)
        for _ in range(30):
            await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    assert warnings_of(caplog) == []
    assert not monitor_threads()


@pytest.mark.anyio
async def test_a_loop_still_blocked_is_reported_while_it_lasts(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    async with monitor_event_loop(threshold=0.3, still_blocked_after=0.7):
        await anyio.sleep(0.2)
        await slow_hook(1.5)
        await anyio.sleep(0.3)
    records = warnings_of(caplog)
    assert len(records) == 2, [r.getMessage() for r in records]
    during, after = (r.getMessage() for r in records)
    assert "so far in slow_hook" in during and "frozen until it returns" in during
    assert "blocked for" in after and "in slow_hook" in after
    assert records[0].thread != records[1].thread  # the first came from the monitor thread


@pytest.mark.anyio
async def test_a_block_right_before_the_exit_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    async with monitor_event_loop(threshold=0.3):
        await anyio.sleep(0.2)
        await slow_hook(0.9)  # no await after it: the heartbeat never wakes again
    assert [seconds_in(r) >= 0.6 for r in warnings_of(caplog)] == [True]


@pytest.mark.anyio
async def test_the_task_form_stops_with_its_task_group(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    async with anyio.create_task_group() as tg:
        await tg.start(watch_event_loop, 0.3)
        assert len(monitor_threads()) == 1
        await slow_hook(0.9)
        await anyio.sleep(0.3)
        tg.cancel_scope.cancel()
    assert len(warnings_of(caplog)) == 1
    assert not monitor_threads()


@pytest.mark.anyio
async def test_exceptions_and_cancellation_pass_through_and_stop_the_thread() -> None:
    with pytest.raises(KeyError) as info:  # not an ExceptionGroup
        async with monitor_event_loop(threshold=0.3):
            try:
                raise ValueError("first")
            except ValueError:
                raise KeyError("second") from None
    assert isinstance(info.value.__context__, ValueError)  # its own context, not the group
    assert not monitor_threads()
    with anyio.move_on_after(0.3) as scope:
        async with monitor_event_loop(threshold=0.3):
            await anyio.sleep(30)
    assert scope.cancelled_caught
    assert not monitor_threads()


@pytest.mark.anyio
async def test_a_failing_on_block_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def broken(report: BlockReport) -> None:
        raise RuntimeError("broken handler")

    caplog.set_level(logging.WARNING, logger=LOGGER)
    async with monitor_event_loop(threshold=0.3, on_block=broken):
        await anyio.sleep(0.2)
        await slow_hook(0.9)
        await anyio.sleep(0.3)
    records = warnings_of(caplog)
    assert len(records) == 1 and records[0].exc_info is not None
    assert "broken handler" in str(records[0].exc_info[1])


@pytest.mark.anyio
@pytest.mark.parametrize("value", ["0", "off", "OFF"])
async def test_the_environment_variable_turns_it_off(
    value: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(BLOCK_WARNING_ENV, value)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    async with monitor_event_loop():
        assert not monitor_threads()
        if value == "off":
            await slow_hook(0.9)
            await anyio.sleep(0.2)
    async with anyio.create_task_group() as tg:
        await tg.start(watch_event_loop)  # returns at once
        assert not monitor_threads()
    assert warnings_of(caplog) == []


# -- through an agent -----------------------------------------------------------------


class BlockingAgent(Agent):
    """``block`` sleeps without awaiting; anything else is echoed."""

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = " ".join(b.text for b in prompt if isinstance(b, TextContent))
        if text == "block":
            time.sleep(1.5)
        await session.say(text)
        return "end_turn"


@pytest.mark.anyio
async def test_an_agent_hook_that_blocks_is_named(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_serve = testing_client.serve

    async def monitored_serve(*args: object, **kwargs: object) -> None:
        async with monitor_event_loop(threshold=0.3):
            await real_serve(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(testing_client, "serve", monitored_serve)  # what connect_agent serves the agent with
    caplog.set_level(logging.WARNING, logger=LOGGER)
    async with connect_agent(BlockingAgent()) as client:
        await client.initialize()
        a, b = await client.new_session("/tmp"), await client.new_session("/tmp")
        await client.prompt(a, "block")
        await client.prompt(b, "hello")  # waits behind the block: the reason for the warning
        await client.wait_idle(a)
        await client.wait_idle(b)
        await anyio.sleep(0.3)
        assert len(monitor_threads()) == 1
    assert not monitor_threads()
    records = warnings_of(caplog)
    assert len(records) == 1, [r.getMessage() for r in records]
    assert "in BlockingAgent.prompt (tests/unit/test_loop_monitor.py:" in records[0].getMessage()
    assert seconds_in(records[0]) >= 1.0


# -- a paused process is not a blocked loop ------------------------------------------

PAUSED = """
import sys, time, anyio
from acp_agent._util.loop_monitor import monitor_event_loop

async def slow_hook():
    time.sleep(0.9)

async def short_step():
    time.sleep(0.1)  # under the threshold; the test stops the process meanwhile (for 1.5 s)

async def main():
    async with monitor_event_loop(0.3):
        await anyio.sleep(0.3)
        print("ready", flush=True)
        await short_step()
        await anyio.sleep(2.0)  # idle: the samples taken after the pause show the loop waiting
        await slow_hook()
        await anyio.sleep(0.3)

backend, _, loop = sys.argv[1].partition("+")
anyio.run(main, backend=backend, backend_options={"use_uvloop": True} if loop == "uvloop" else {})
"""


@pytest.mark.parametrize("backend", ["asyncio", "asyncio+uvloop", "trio"])
def test_a_paused_process_is_not_reported_but_a_later_block_is(backend: str) -> None:
    if backend.endswith("+uvloop"):
        pytest.importorskip("uvloop")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop(BLOCK_WARNING_ENV, None)
    process = subprocess.Popen([sys.executable, "-c", PAUSED, backend], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        process.send_signal(signal.SIGSTOP)
        time.sleep(1.5)
        process.send_signal(signal.SIGCONT)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    blocked = [line for line in stderr.splitlines() if "blocked for" in line]
    assert len(blocked) == 1 and "in slow_hook (<string>:" in blocked[0], stderr


# -- pieces ---------------------------------------------------------------------------


def test_the_threshold_comes_from_the_argument_then_the_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(BLOCK_WARNING_ENV, raising=False)
    assert _resolve_threshold(None) == DEFAULT_THRESHOLD
    for text, expected in [("", DEFAULT_THRESHOLD), (" 1.5 ", 1.5), ("0", None), ("off", None), ("Off", None)]:
        monkeypatch.setenv(BLOCK_WARNING_ENV, text)
        assert _resolve_threshold(None) == expected, text
    monkeypatch.setenv(BLOCK_WARNING_ENV, "off")
    assert _resolve_threshold(2.0) == 2.0  # the code's own value wins
    assert _resolve_threshold(0) is None
    for junk in ("soon", "-1", "nan", "inf"):  # refused naming the variable (run_stdio: exit status 2)
        monkeypatch.setenv(BLOCK_WARNING_ENV, junk)
        with pytest.raises(EnvironmentVariableError, match=f"^ACP_AGENT_BLOCK_WARNING='{junk}' is not valid"):
            _resolve_threshold(None)
    assert environment.BLOCK_WARNING.default == DEFAULT_THRESHOLD
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError):
            _resolve_threshold(bad)


@pytest.mark.anyio
async def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="interval"):
        async with monitor_event_loop(0.5, interval=0.2):
            pass
    with pytest.raises(ValueError, match="still_blocked_after"):
        async with monitor_event_loop(0.5, still_blocked_after=0.1):
            pass


STDLIB = os.path.dirname(os.__file__)
SITE = os.path.dirname(os.path.dirname(anyio.__file__))  # site-packages
LIBRARY = str(ROOT / "acp_agent" / "session.py")


def test_blame_prefers_own_code_then_the_outermost_installed_frame() -> None:
    inner = Frame("Condition.wait", f"{STDLIB}/threading.py", 320)
    own = Frame("fetch", "/home/me/agent/tools.py", 12)
    hook = Frame("MyAgent.prompt", "/home/me/agent/main.py", 40)
    library = Frame("Session._run", LIBRARY, 100)
    anyio_frame = Frame("run", f"{SITE}/anyio/_backends/_asyncio.py", 9)
    assert _blame([inner, own, hook, library, anyio_frame]) == own  # innermost own code
    socket = Frame("recv_into", f"{STDLIB}/socket.py", 700)
    urllib3 = Frame("HTTPConnection.getresponse", f"{SITE}/urllib3/connection.py", 5)
    installed_hook = Frame("MyAgent.prompt", f"{SITE}/my_agent/main.py", 40)
    assert _blame([socket, urllib3, installed_hook, library, anyio_frame]) == installed_hook
    assert _blame([inner, library, anyio_frame]) == inner  # only library code: the innermost


def test_only_the_loops_own_wait_counts_as_idle() -> None:
    select = Frame("EpollSelector.select", f"{STDLIB}/selectors.py", 468)
    run_once = Frame("BaseEventLoop._run_once", f"{STDLIB}/asyncio/base_events.py", 1884)
    communicate = Frame("Popen._communicate", f"{STDLIB}/subprocess.py", 2108)
    trio_wait = Frame("EpollIOManager.get_events", f"{SITE}/trio/_core/_io_epoll.py", 243)
    trio_run = Frame("unrolled_run", f"{SITE}/trio/_core/_run.py", 2700)
    runner = Frame("Runner.run", f"{STDLIB}/asyncio/runners.py", 118)  # uvloop waits in C, called from here
    anyio_run = Frame("run", f"{SITE}/anyio/_backends/_asyncio.py", 2621)
    assert _is_waiting_for_events([select, run_once])
    assert _is_waiting_for_events([trio_wait, trio_run])
    assert _is_waiting_for_events([runner, anyio_run])
    assert not _is_waiting_for_events([select, communicate])  # subprocess.run in a hook
    assert not _is_waiting_for_events([select])
