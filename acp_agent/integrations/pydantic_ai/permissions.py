"""Who decides whether a tool that needs approval runs: the policy, the session's remembered answers,
and else the user (``session/request_permission``).

A tool needs approval when pydantic-ai says so (``requires_approval=True``, an
``ApprovalRequiredToolset``, a tool raising ``ApprovalRequired``). The
[`PermissionPolicy`][acp_agent.integrations.pydantic_ai.PermissionPolicy] may allow or reject it
without asking; otherwise the user is offered *allow once*, *allow always*, *reject once* and *reject
always*. An "always" answer is remembered in the session (it survives a restart with a durable store,
and a fork copies it) for the same tool with the same arguments, or for the tool whatever its
arguments with ``remember="tool"``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from ...schema import PermissionOption
from ...session import Session

__all__ = ["PERMISSION_OPTIONS", "Decision", "PermissionPolicy", "remember", "remembered"]

Decision = Literal["allow", "reject", "ask"]
"""What a policy says about one call: run it, refuse it, or ask the user."""

PERMISSION_OPTIONS = (
    PermissionOption(option_id="allow_once", name="Allow", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
    PermissionOption(option_id="reject_always", name="Always reject", kind="reject_always"),
)
"""The options offered for a tool call that needs approval (ids are the kinds)."""

_DATA_KEY = "pydantic_ai.permissions"


@dataclass(frozen=True, slots=True)
class PermissionPolicy:
    """Which tool calls run without asking: ``allow`` and ``reject`` name tools decided in advance;
    ``remember`` scopes an "always" answer to the same ``"call"`` (tool and arguments, the default) or
    to the whole ``"tool"``. Subclass and override
    [`decide`][acp_agent.integrations.pydantic_ai.PermissionPolicy.decide] for anything finer (a command
    allow-list, paths)."""

    allow: Collection[str] = field(default_factory=frozenset)
    reject: Collection[str] = field(default_factory=frozenset)
    remember: Literal["call", "tool"] = "call"

    def decide(self, tool_name: str, args: Mapping[str, Any], session: Session) -> Decision:
        """The decision for one call before the remembered answers are consulted."""
        if tool_name in self.reject:
            return "reject"
        if tool_name in self.allow:
            return "allow"
        return "ask"

    def scope(self, tool_name: str, args: Mapping[str, Any]) -> str:
        """The key an "always" answer for this call is remembered under."""
        if self.remember == "tool":
            return tool_name
        return tool_name + " " + orjson.dumps(dict(args), option=orjson.OPT_SORT_KEYS, default=str).decode()


def remembered(session: Session, key: str) -> Decision:
    """The answer remembered for ``key`` in this session (``ask`` when none)."""
    answers: dict[str, str] = session.data.get(_DATA_KEY) or {}
    answer = answers.get(key)
    return "allow" if answer == "allow" else "reject" if answer == "reject" else "ask"


def remember(session: Session, key: str, decision: Literal["allow", "reject"]) -> None:
    """Remember an "always" answer (a new dict, so a fork's shallow copy of ``data`` stays its own)."""
    session.data[_DATA_KEY] = {**(session.data.get(_DATA_KEY) or {}), key: decision}
