"""How a pydantic-ai tool call looks in the client: its title, ``kind`` and file locations.

A [`ToolPresenter`][acp_agent.integrations.pydantic_ai.ToolPresenter] is a function of the tool's name,
its arguments and the session; [`present_tool`][acp_agent.integrations.pydantic_ai.present_tool] is the
default, which guesses from the tool's name (``read_file`` reads, ``run_command`` executes) and from
arguments that name a path. Tools that know better show more themselves: the shell tools attach a
terminal and the file tools a diff (``acp_agent.integrations.pydantic_ai.coding``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...session import Session

__all__ = ["ToolPresentation", "ToolPresenter", "guess_kind", "present_tool"]


@dataclass(frozen=True, slots=True)
class ToolPresentation:
    """What the client shows for one tool call: ``title``, ``kind`` (an ACP tool kind) and the absolute
    ``locations`` (file paths) it works on."""

    title: str
    kind: str = "other"
    locations: Sequence[str] = field(default_factory=tuple)


ToolPresenter = Callable[[str, Mapping[str, Any], Session], ToolPresentation | None]
"""Given a tool's name, its arguments and the session, the presentation (``None``: the default's)."""

_KINDS: tuple[tuple[str, str], ...] = (
    # Order matters: the first word that matches wins ("read_and_edit" edits).
    ("delete", r"delete|remove|rm|unlink"),
    ("move", r"move|rename|mv"),
    ("edit", r"edit|write|patch|replace|create|update|insert|append|save"),
    ("execute", r"run|exec|execute|shell|bash|command|terminal|sh|cmd|test|build"),
    ("fetch", r"fetch|http|url|web|download|browse"),
    ("search", r"search|grep|find|glob|ls|list|lookup|query"),
    ("read", r"read|view|cat|open|get|show|load"),
    ("think", r"think|plan|reason|reflect"),
)
_WORD = re.compile(r"[a-z]+")
_PATH_KEYS = ("path", "file", "file_path", "filepath", "filename", "paths", "files")
_TITLE_KEYS = ("command", "cmd", "query", "pattern", "url", *_PATH_KEYS)
_TITLE_LIMIT = 80


def guess_kind(tool_name: str) -> str:
    """The ACP tool kind a tool's name suggests (``other`` when nothing does)."""
    words = set(_WORD.findall(tool_name.lower()))
    for kind, pattern in _KINDS:
        if any(re.fullmatch(pattern, word) for word in words):
            return kind
    return "other"


def _paths(args: Mapping[str, Any], cwd: str) -> list[str]:
    found: list[str] = []
    for key in _PATH_KEYS:
        value = args.get(key)
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, str) and item:
                found.append(os.path.normpath(os.path.join(cwd, item)))
    return found


def present_tool(tool_name: str, args: Mapping[str, Any], session: Session) -> ToolPresentation:
    """The default presentation: a kind guessed from the name, the title ``name: <main argument>``
    (a command, query, URL or path), and the paths the arguments name, made absolute against the cwd."""
    title = tool_name
    for key in _TITLE_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            one_line = " ".join(value.split())
            if len(one_line) > _TITLE_LIMIT:
                one_line = one_line[: _TITLE_LIMIT - 1] + "…"
            title = f"{tool_name}: {one_line}"
            break
    return ToolPresentation(title=title, kind=guess_kind(tool_name), locations=_paths(args, session.cwd))
