"""The rules the checker judges ([`RULES`][acp_agent.testing.RULES], [`SHOULD_RULES`][acp_agent.testing.SHOULD_RULES])
and how a broken one is reported."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .constants import (
    QUOTE_LIMIT,
)

RULES: dict[str, str] = {
    "R1": "an agent line (raw bytes given) is UTF-8, holds exactly one JSON value and no raw CR/LF",
    "R2": "every agent line is a JSON-RPC message (not stray text, not a scalar, not a shapeless object)",
    "R3": 'every agent message carries "jsonrpc": "2.0"',
    "R6": "agent request ids are strings or integers and never reused while pending",
    "R7": "an answer's id equals a received request id with the same JSON type",
    "R8": "every client request is answered exactly once (unanswered at finish, or answered twice)",
    "R9": "arrays from the agent only answer client batches and hold only responses; an empty batch gets -32600",
    "R10": "unparseable client input gets -32700, non-message JSON gets -32600, both with id null",
    "R11": "a client request with id null or a fractional id gets -32600 with id null",
    "R12": "no answer to notifications (id-null result, or id-null error with no invalid input pending); "
           "-32601 has data.method",
    "R13": "a request with structurally invalid params (not an object, required field missing or mistyped) "
           "is not answered with a success",
    "R15": "-32002 has data.sessionId = requested id; no success for session-scoped requests on sessions not open",
    "R16": "a request withdrawn with $/cancel_request is still answered",
    "R17": "no second answer after a $/cancel_request for an answered id; agent $/cancel_request names its own request",
    "R20": "a tool call whose permission was not granted does not start (pending -> in_progress)",
    "R21": "a request sent before initialize (none in flight) is answered -32600",
    "R22": "the agent sends no request or notification before the initialize success answer",
    "R23": "initialize answers a version <= the requested one; -32022 only when none is, with {requested, supported}",
    "R25": "the initialize result has protocolVersion and info.name / info.version",
    "R26": "initialize while one is in flight, after another request, or for a lower version is answered -32600",
    "R27": "with capabilities.session, the baseline session methods are not answered -32601",
    "R28": "advertised optional methods (fork, delete, archive, status, set_title) are not answered -32601",
    "R29": "terminal auth methods are offered only when the client sent capabilities.auth.terminal",
    "R30": "with non-empty authMethods, auth/login and auth/logout are not answered -32601",
    "R31": "session/new and session/fork return a sessionId not used before on the connection",
    "R32": "configOptions / availableCommands in new/resume/fork results are arrays, never null",
    "R33": "session/new/resume/fork with an MCP server of a transport not advertised is not a success",
    "R34": "paths the agent sends (terminal cwd, locations, diff paths, child cwd, listed cwd) are absolute",
    "R35": "malformed or unknown replayFrom is rejected; no user-message replay on a resume without replayFrom",
    "R39": "a successful resume has a state_update for the session between the request and the answer",
    "R40": "resume order: no replayed message of a resumed (not open) session after its snapshot, before the answer",
    "R42": "a close answer never finds the session running / requires_action (idle cancelled first)",
    "R44": "pending permission requests / elicitations of a session are withdrawn before its close answer",
    "R45": "nothing is sent for a session after its close answer (until it is resumed)",
    "R46": "session/close for a session not open is answered {} (not an error)",
    "R47": "session/list results carry a sessions array",
    "R49": "session/delete succeeds only with session.delete advertised; deleted sessions are not listed",
    "R50": "session/set_config_option results carry the configOptions array",
    "R51": "config_option_update / available_commands_update carry complete arrays",
    "R52": "a successful session/prompt answer carries a non-empty messageId",
    "R53": "the messageId of an accepted prompt is echoed as user_message(_chunk) in that session",
    "R54": "a prompt answered with an error was not echoed as a user message",
    "R55": "a prompt made only of text / resource_link blocks is not rejected with -32602",
    "R57": "an accepted prompt on an idle session is followed by running / requires_action",
    "R58": "the idle that ends work carries a stopReason; stopReason error carries an error object",
    "R59": "requires_action only while a question of the session (permission, elicitation) waits on the user",
    "R60": "no agent output while requires_action; not left in requires_action after its requests were answered",
    "R61": "requests only for listed background work, and request-scoped elicitations, do not put the session in "
           "requires_action",
    "R62": "a repeated or resume idle carries no new stop reason and no usage",
    "R63": "state values are running / requires_action / idle / unknown (or _custom)",
    "R67": "foreground permission requests still pending when a cancelled work ends were withdrawn",
    "R68": "after session/cancel of active work an idle follows; the cancelled work sends nothing after it",
    "R69": "the idle ending cancelled work does not say stopReason error",
    "R70": "foreground elicitations still pending when a cancelled work ends were withdrawn",
    "R71": "status: null is never sent for a tool call that has started",
    "R73": "every message update / chunk carries a non-empty messageId",
    "R74": "the first tool_call_update of a tool call has a title",
    "R75": "terminal output data (chunks and snapshots) is valid base64",
    "R77": 'commands are {"type": "command"} with unique names, no leading "/", no whitespace',
    "R79": "a child's announcing subagent_update precedes every message naming the child; a child keeps its parent",
    "R80": "the parent's subagent_update.state mirrors the child's latest own snapshot",
    "R81": "permission requests have a title, >= 1 option with unique optionIds; command subjects an absolute cwd",
    "R83": "elicitation modes are used only when the client advertised them, and a form never asks for a secret",
    "R84": "unknown methods, update kinds, enum values and item types start with _",
    "R85": "work the foreground waits on (a pending foreground permission request or elicitation) is not listed in "
           "requires_action",
    "R87": "background items are well-formed, unique, and name live entities of this session / its children",
    "R88": "a tool call whose content is only listed terminals is not listed next to them",
    "R89": "a listed pending / paused tool call leaves the list only after a final status",
    "R90": "a child is listed exactly while not idle-with-empty-list; dropped only after such a state",
    "R91": "once a session reported a list, every later state_update carries background",
    "R92": "a listed item that was finalized is followed by a new snapshot (judged at finish)",
    "R93": "an item is listed only after its terminal_update / tool_call_update",
    "R94": "a listed item leaves the list only after its exitStatus / final status",
    "R95": "no removal snapshot idle + [] immediately followed by running",
    "R97": "tool call statuses never go back to pending and never change after a final status",
    "R100": "cancel is not advertised on a final tool call / exited terminal (judged at finish)",
    "R101": "an accepted tool_call/cancel is followed by a final status of that tool call",
    "R102": "tool_call/cancel is never -32601, and not accepted for unknown/final/non-cancellable tool calls",
    "R103": "an accepted terminal/cancel is followed by an exitStatus of that terminal",
    "R104": "terminal/cancel is never -32601, and not accepted for unknown/exited/non-cancellable terminals",
    "R105": "per-item cancels do not end the foreground, cancel referencing tool calls or clear terminal output",
    "R106": "session/cancel does not cancel listed tool calls",
    "R107": "session/cancel does not withdraw permission requests whose subject is listed work",
    "R110": "a permission request for background work is sent only after a snapshot lists that work",
    "R111": "after a parent's close answer nothing is sent for its child sessions",
    "R112": "a fork never lists entities it copied from its source",
    "R113": "every item of the resume snapshot had an entity update between the resume request and the snapshot",
    # SDK-level rules: gaps in the reference that this SDK closes (docs/rules.md, "SDK-level rules").
    "S1": "a terminal reports its exit once: afterwards only capabilities / _meta change and no output follows",
    "S2": "a session id is named only after the request that creates it arrived, and only for a session "
          "that comes to exist on the connection",
    "S3": "nothing for a new or forked session goes out before the answer that gives the client its id "
          "(the reference allows it; a client cannot place it)",
    "S8": "a select config option's currentValue is one of its values, and its values are unique "
          "(the reference says so in §5.7 without a rule number)",
    # ACP v2 Preview (docs/rules.md, "ACP v2 Preview").
    "P2": "an idempotencyKey is a string of 1-255 characters: a valid one is not refused for itself, another one "
          "is not accepted",
    "P3": "a key puts at most one user message into its session: a retry gets the first attempt's messageId, and "
          "the key never answers a new message",
    "P4": "a duplicate sent before the first attempt was answered, or while its turn runs, gets the same messageId "
          "(it is not queued as a second prompt)",
    "P5": "a prompt without a key, or with another key, is a new submission with a messageId of its own",
    "P8": "a resume with replayFrom sends one replay_complete for the session, after the replayed history and "
          "before its answer",
    "P9": "a resume with replayFrom sends replay_complete even when there is no history to replay",
    "P10": "the resume's state snapshot comes after replay_complete (before it is history, after it live state)",
    "P11": "live updates of a session being replayed are held back until its replay_complete",
    "P12": "each child announced during the resume gets its own replay_complete, after its history, before "
           "the answer",
    "P13": "no replay_complete without a resume with replayFrom, nor for a resume that failed",
    "P17": "prompt suggestions go only to a client with capabilities.session.promptSuggestions, in the block "
           "types it takes",
    "P18": "a prompt_suggestions_update carries the whole suggestions array ([] withdraws them)",
    "P19": "each suggestion's prompt is non-empty and not only blank text",
    "P20": "a replay leaves prompt suggestions out (none before replay_complete)",
}
"""Every rule the checker judges: rule id (``R94``, ``S1``, ``P3``) -> the rule in words, as it judges it.

[Wire rules](../rules.md) states each in full."""

SHOULD_RULES: frozenset[str] = frozenset({
    "R44", "R46", "R58", "R59", "R67", "R70", "R74", "R80", "R92", "R95", "R100", "S3", "P20",
})
"""The rules that are SHOULDs: reported with ``level == "SHOULD"``; ``WireChecker(ignore=SHOULD_RULES)``
switches them off."""


RULES_PAGE = "docs/rules.md"
"""The page that states every rule in words (the site's "Wire rules"); each rule has the anchor ``#r94``."""


def rule_link(rule: str) -> str:
    """Where ``rule`` is stated in words: `RULES_PAGE` and the rule's anchor (``docs/rules.md#r94``)."""
    return f"{RULES_PAGE}#{rule.lower()}"


class RuleViolation(AssertionError):
    """One broken rule: ``rule`` (e.g. ``"R94"``), its ``level`` (MUST/SHOULD), ``statement``
    (the rule in words, from [`RULES`][acp_agent.testing.RULES]), ``text`` (what happened) and the offending
    ``messages``.

    ``level`` defaults to the rule's own level (SHOULD for [`SHOULD_RULES`][acp_agent.testing.SHOULD_RULES], else MUST).
    The text of a known rule ends with where the site states it: ``(see docs/rules.md#r94)``.
    """

    def __init__(self, rule: str, text: str, messages: Sequence[Any] = (), level: str | None = None) -> None:
        self.rule = rule
        self.text = text
        self.level = level if level is not None else ("SHOULD" if rule in SHOULD_RULES else "MUST")
        self.statement = RULES.get(rule, "")
        self.messages: list[Any] = list(messages)
        quoted = "".join(f"\n  > {quote(m)}" for m in self.messages)
        if self.statement:
            head = f"{rule} [{self.level}] {self.statement}: {text} (see {rule_link(rule)})"
        else:
            head = f"{rule} [{self.level}] {text}"
        super().__init__(head + quoted)


def quote(message: Any) -> str:
    """A message as compact JSON, cut at the quote limit, for a violation report."""
    try:
        text = json.dumps(message, separators=(",", ":"), ensure_ascii=False, default=repr)
    except ValueError:
        text = repr(message)
    return text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT] + "…"
