"""A shell-and-files toolset for coding agents, on the SDK's own terminals and v2 diffs.

[`CodingTools`][acp_agent.integrations.pydantic_ai.CodingTools] gives a pydantic-ai agent, per session
(``PydanticAIAgent(agent, toolsets=CodingTools().toolsets)``):

- ``read_file``, ``list_files``, ``search``: read-only, run without asking;
- ``write_file``, ``edit_file``: need approval; the tool call shows the change as a ``diff`` (a
  ``git_patch`` with absolute paths) with the file as its location, from the start when
  [`presenter`][acp_agent.integrations.pydantic_ai.CodingTools.presenter] is the agent's tool presenter
  (so the user sees the diff when asked to approve it);
- ``run_command``: needs approval; runs as an SDK terminal shown in the tool call (live output,
  ``terminal/cancel`` stops it). With ``background=true`` it is left running (a dev server, a watcher):
  listed, stoppable, its exit reported, and with ``notify_on_exit=true`` the model hears of the exit in
  a follow-up turn. ``list_background`` and ``stop_background`` manage those.

Paths are confined to the session's cwd (symlinks resolved, for every tool: ``search`` and ``list_files`` skip
a link that leads out) unless ``confine=False``. Only regular files are read, and at most
[`MAX_FILE_BYTES`][acp_agent.integrations.pydantic_ai.coding.MAX_FILE_BYTES] of each (``/dev/zero``, a FIFO or a
huge log cannot exhaust the server's memory or hang a tool).
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import anyio
import anyio.to_thread
import regex
from pydantic_ai import ModelRetry
from pydantic_ai.toolsets import FunctionToolset

from ...errors import LimitExceededError
from ...schema import Content, Diff, TextContent, ToolCallLocation
from ...session import Session
from ...terminals import Terminal
from ...tool_calls import ToolCall, patch_text, text_diff
from .bridge import current_tool
from .presenter import ToolPresentation

__all__ = ["CodingTools", "patch_text"]

OUTPUT_LIMIT = 16_000
"""Characters of a command's output (its tail) or a file returned to the model at most."""

MAX_FILE_BYTES = 4 * 1024 * 1024
"""Bytes of one file a tool reads at most (``read_file`` says when it stopped there; ``edit_file`` refuses a larger
file; ``search`` searches its first ``MAX_FILE_BYTES``)."""

SEARCH_SECONDS = 5.0
"""Seconds one ``search`` may spend matching at most. Its pattern comes from the model, and so from whoever wrote the
prompt: a pattern that backtracks (``(A|AA)+B``) would otherwise run for days. Matching runs with the GIL released
(the ``regex`` library's ``concurrent`` mode), so other sessions' turns go on meanwhile."""

SKIPPED_DIRS = frozenset({".git", "node_modules", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache"})


@dataclass
class _Background:
    command: str
    terminal: Terminal


@dataclass
class CodingTools:
    """Shell and file tools rooted at each session's cwd (see the module docstring).

    ``confine``: refuse paths outside the cwd. ``shell_env``: environment added for commands (the
    agent's own environment is passed on, as a terminal does). ``command_timeout``: seconds a
    foreground command may run before it is stopped.
    """

    confine: bool = True
    shell_env: dict[str, str] = field(default_factory=dict)
    command_timeout: float = 300.0
    _background: dict[str, dict[str, _Background]] = field(default_factory=dict)

    async def presenter(self, tool_name: str, args: Mapping[str, Any], session: Session) -> ToolPresentation | None:
        """A tool presenter for these tools (``PydanticAIAgent(tool_presenter=tools.presenter)``): titles
        such as "Edit src/a.py" and "Run `make test`", and for a write or an edit the diff it would make,
        shown before the user is asked; ``None`` for other tools (the default presentation)."""
        root = os.path.realpath(session.cwd)
        path = args.get("path")
        if tool_name == "run_command" and isinstance(args.get("command"), str):
            return ToolPresentation(f"Run `{' '.join(str(args['command']).split())[:80]}`", kind="execute")
        if tool_name not in _TITLES or not isinstance(path, str):
            return None
        verb, kind = _TITLES[tool_name]
        try:
            target = self._resolver(root)(path)
        except ModelRetry:
            return ToolPresentation(f"{verb} {path}", kind=kind)  # refused when it runs
        content: list[Any] = []
        if tool_name in ("write_file", "edit_file"):
            change = await _planned_change(target, tool_name, args)
            if change is not None:
                content.append(_diff(target, *change))
        return ToolPresentation(f"{verb} {os.path.relpath(target, root)}", kind=kind, locations=[target],
                                content=content)

    def toolsets(self, session: Session) -> list[FunctionToolset[Any]]:
        """The session's toolset (pass this method as ``PydanticAIAgent(toolsets=...)``)."""
        return [self.toolset(session)]

    def toolset(self, session: Session) -> FunctionToolset[Any]:
        """A pydantic-ai toolset whose tools work in ``session.cwd``."""
        root = os.path.realpath(session.cwd)
        tools: FunctionToolset[Any] = FunctionToolset()
        resolve = self._resolver(root)
        background = self._background.setdefault(session.id, {})

        @tools.tool_plain
        async def read_file(path: str, offset: int = 1, limit: int = 2000) -> str:
            """Read a text file: lines ``offset`` to ``offset + limit - 1`` (1-based)."""
            target = resolve(path)
            with _told(path):
                text, whole = await anyio.to_thread.run_sync(_read_bounded, target)
            lines = text.splitlines()[max(offset, 1) - 1:max(offset, 1) - 1 + limit]
            note = "" if whole else f"\n(the file is longer: only its first {MAX_FILE_BYTES} bytes were read)"
            return _clip("\n".join(lines)) + note

        @tools.tool_plain
        async def list_files(path: str = ".", pattern: str = "*") -> str:
            """List the files under a directory (recursively) whose name matches a glob pattern."""
            base = resolve(path)
            found = await anyio.to_thread.run_sync(lambda: sorted(_walk(base, root, pattern, self.confine))[:500])
            return "\n".join(found) or "(no files)"

        @tools.tool_plain
        async def search(pattern: str, path: str = ".", glob: str = "*") -> str:
            """Search files for a regular expression; answers ``file:line: text`` lines."""
            try:
                compiled = regex.compile(pattern)
            except regex.error as exc:
                raise ModelRetry(f"not a valid regular expression: {exc}") from None
            base = resolve(path)
            hits: list[str] = []
            deadline = time.monotonic() + SEARCH_SECONDS
            try:
                await anyio.to_thread.run_sync(lambda: hits.extend(_grep(base, root, glob, compiled, deadline,
                                                                          self.confine)))
            except _SearchTooSlow:
                hits.append(f"(search stopped after {SEARCH_SECONDS:g} s: the pattern takes too long to match; "
                            "use a simpler one)")
            return _clip("\n".join(hits)) or "(no matches)"

        @tools.tool_plain(requires_approval=True)
        async def write_file(path: str, content: str) -> str:
            """Create or overwrite a text file with ``content``."""
            target = resolve(path)
            file = anyio.Path(target)
            with _told(path):
                old = await _read_whole(target, path) if await file.exists() else None
                await _show_diff(target, old, content)
                await file.parent.mkdir(parents=True, exist_ok=True)
                await file.write_text(content)
            return f"wrote {len(content)} characters to {path}"

        @tools.tool_plain(requires_approval=True)
        async def edit_file(path: str, old_text: str, new_text: str) -> str:
            """Replace the one occurrence of ``old_text`` in a file with ``new_text``."""
            target = resolve(path)
            file = anyio.Path(target)
            if not await file.exists():
                raise ModelRetry(f"{path} does not exist")
            with _told(path):
                old = await _read_whole(target, path)
            count = old.count(old_text)
            if count != 1:
                raise ModelRetry(f"old_text occurs {count} times in {path}; it must occur exactly once")
            new = old.replace(old_text, new_text, 1)
            await _show_diff(target, old, new)
            with _told(path):
                await file.write_text(new)
            return f"edited {path}"

        @tools.tool_plain(requires_approval=True)
        async def run_command(command: str, background: bool = False, notify_on_exit: bool = False) -> str:
            """Run a shell command in the project directory and answer its exit status and output.

            ``background=true`` leaves it running (a dev server, a watcher) and answers at once; with
            ``notify_on_exit=true`` you are told when it exits.
            """
            return await self._run(session, root, command, background, notify_on_exit)

        @tools.tool_plain
        async def list_background() -> str:
            """List the commands left running in the background, with their terminal ids and state."""
            rows = [f"{terminal_id}: {job.command} ({_state(job.terminal)})"
                    for terminal_id, job in background.items()]
            return "\n".join(rows) or "(no background commands)"

        @tools.tool_plain
        async def stop_background(terminal_id: str) -> str:
            """Stop a background command by its terminal id."""
            job = background.get(terminal_id)
            if job is None:
                raise ModelRetry(f"no background command {terminal_id}; see list_background")
            if job.terminal.exit_status is None:
                await job.terminal.cancel()
                await job.terminal.wait()
            return f"{terminal_id}: {_state(job.terminal)}"

        return tools

    def _resolver(self, root: str) -> Callable[[str], str]:
        confine = self.confine

        def resolve(path: str) -> str:
            target = os.path.realpath(os.path.join(root, os.path.expanduser(path)))
            if confine and os.path.commonpath([root, target]) != root:
                raise ModelRetry(f"{path} is outside the project directory {root}; use a path inside it")
            return target

        return resolve

    async def _run(self, session: Session, root: str, command: str, background: bool, notify_on_exit: bool) -> str:
        context = current_tool()
        tool = context.tool_call
        if background:
            try:
                terminal = await session.start_terminal(command, cwd=root, env=self.shell_env, tool_call=tool,
                                                        ends_tool_call=True, detach=True)
            except (LimitExceededError, OSError) as exc:  # ProcessStartError is an OSError
                return await _refused(tool, command, exc)
            tool.detach()  # from now on the terminal stands for the work: its exit ends the tool call
            self._background.setdefault(session.id, {})[terminal.id] = _Background(command, terminal)
            if notify_on_exit:
                terminal.on_exit(lambda status: context.follow_up(
                    f"[background] The command `{command}` (terminal {terminal.id}) exited "
                    f"({_status_text(status.exit_code, status.signal)}). Its last output:\n"
                    f"{_clip(terminal.tail().decode(errors='replace'))}"))
            return f"Started in the background as terminal {terminal.id}; it keeps running after this turn."
        try:
            terminal = await session.start_terminal(command, cwd=root, env=self.shell_env, tool_call=tool)
        except (LimitExceededError, OSError) as exc:
            return await _refused(tool, command, exc)
        context.output_shown()  # the terminal shows the output: the returned text is the model's alone
        with anyio.move_on_after(self.command_timeout) as scope:
            status = await terminal.wait()
        if scope.cancelled_caught:
            await terminal.cancel()
            status = await terminal.wait()
        output = _clip(terminal.tail().decode(errors="replace"))
        return f"{_status_text(status.exit_code, status.signal)}\n{output}"


_TITLES = {"read_file": ("Read", "read"), "list_files": ("List", "search"), "search": ("Search", "search"),
           "write_file": ("Write", "edit"), "edit_file": ("Edit", "edit")}


async def _refused(tool: ToolCall, command: str, exc: Exception) -> str:
    """A command that could not start (a process quota, a missing shell): the tool call fails and the model reads
    why, as the tool's result (the turn goes on)."""
    reason = str(exc) if isinstance(exc, LimitExceededError) else f"{exc.strerror or type(exc).__name__}" if isinstance(
        exc, OSError) else str(exc)
    text = f"The command `{command}` did not start: {reason}. Nothing ran."
    await tool.fail(content=[Content(content=TextContent(text=text))])
    return text


def _diff(path: str, old: str | None, new: str) -> Diff:
    return text_diff(path, old, new)


async def _planned_change(target: str, tool_name: str, args: Mapping[str, Any]) -> tuple[str | None, str] | None:
    """``(old, new)`` text of the change a write or edit would make now (``None`` when it cannot tell)."""
    file = anyio.Path(target)
    try:
        old = await _read_whole(target, target) if await file.exists() else None
    except (OSError, ModelRetry):
        return None
    if tool_name == "write_file":
        content = args.get("content")
        return (old, content) if isinstance(content, str) else None
    old_text, new_text = args.get("old_text"), args.get("new_text")
    if old is None or not isinstance(old_text, str) or not isinstance(new_text, str) or old.count(old_text) != 1:
        return None
    return old, old.replace(old_text, new_text, 1)


async def _show_diff(path: str, old: str | None, new: str) -> None:
    """The change being made, as the tool call's content (replacing a preview the presenter showed)."""
    await current_tool().tool_call.update(locations=[ToolCallLocation(path=path)], content=[_diff(path, old, new)])


def _open_regular(path: str) -> BinaryIO | None:
    """``path`` opened for reading if it is a regular file, else ``None``.

    Opened non-blocking, then checked: a plain ``open`` of a FIFO waits for a writer forever (a worker thread
    lost for good, a turn nobody can cancel). Windows has neither the flags nor FIFOs: a plain read-only open."""
    if sys.platform == "win32":
        descriptor = os.open(path, os.O_RDONLY | os.O_BINARY)
    else:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        return None
    return os.fdopen(descriptor, "rb")  # O_NONBLOCK changes nothing for a regular file's reads


def _read_bounded(path: str) -> tuple[str, bool]:
    """The text of a regular file (its first ``MAX_FILE_BYTES``) and whether that is all of it."""
    file = _open_regular(path)
    if file is None:
        raise ModelRetry(f"{path} is not a regular file")
    with file:
        data = file.read(MAX_FILE_BYTES + 1)
    return data[:MAX_FILE_BYTES].decode(errors="replace"), len(data) <= MAX_FILE_BYTES


async def _read_whole(target: str, shown: str) -> str:
    """A regular file's whole text, or a retry when it is longer than ``MAX_FILE_BYTES``."""
    text, whole = await anyio.to_thread.run_sync(_read_bounded, target)
    if not whole:
        raise ModelRetry(f"{shown} is larger than {MAX_FILE_BYTES} bytes; this tool does not change it")
    return text


@contextlib.contextmanager
def _told(path: str) -> Iterator[None]:
    """A file system error becomes a retry the model reads (``No such file or directory: a.txt``)."""
    try:
        yield
    except OSError as exc:
        raise ModelRetry(f"{exc.strerror or type(exc).__name__}: {path}") from None


def _clip(text: str) -> str:
    return text if len(text) <= OUTPUT_LIMIT else "…" + text[-OUTPUT_LIMIT:]


def _status_text(exit_code: int | None, signal: str | None) -> str:
    if signal:
        return f"killed by {signal}"
    return f"exit code {exit_code}" if exit_code is not None else "exit status unknown"


def _state(terminal: Terminal) -> str:
    status = terminal.exit_status
    return "running" if status is None else _status_text(status.exit_code, status.signal)


def _within(path: str, root: str) -> bool:
    """Whether ``path``, its symlinks resolved, stays under ``root`` (already resolved)."""
    return os.path.commonpath([root, os.path.realpath(path)]) == root


def _walk(base: str, root: str, pattern: str, confine: bool = True) -> Iterator[str]:
    for directory, dirs, files in os.walk(base):  # directory links are not followed
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        for name in files:
            full = os.path.join(directory, name)
            if fnmatch.fnmatch(name, pattern) and (not confine or _within(full, root)):  # a link leading out: skipped
                yield os.path.relpath(full, root)


class _SearchTooSlow(Exception):
    """``search`` ran out of `SEARCH_SECONDS` (not an ``OSError``, which a file's read error is)."""


def _matches(pattern: regex.Pattern[str], line: str, deadline: float) -> bool:
    try:
        return pattern.search(line, timeout=max(deadline - time.monotonic(), 0.001), concurrent=True) is not None
    except TimeoutError:  # regex's; an OSError subclass, so it is turned into one _grep does not swallow
        raise _SearchTooSlow from None


def _grep(base: str, root: str, glob: str, pattern: regex.Pattern[str], deadline: float,
          confine: bool = True) -> Iterator[str]:
    """``file:line: text`` for each matching line, at most 200; `_SearchTooSlow` once ``deadline`` has passed."""
    paths = [base] if os.path.isfile(base) else (os.path.join(root, p) for p in _walk(base, root, glob, confine))
    count = 0
    for path in paths:
        try:
            raw = _open_regular(path)
            if raw is None:
                continue
            with raw:
                text = raw.read(MAX_FILE_BYTES).decode(errors="replace")
                for number, line in enumerate(text.splitlines(), 1):
                    if _matches(pattern, line, deadline):
                        yield f"{os.path.relpath(path, root)}:{number}: {line.rstrip()[:300]}"
                        count += 1
                        if count >= 200:
                            return
        except OSError:
            continue
