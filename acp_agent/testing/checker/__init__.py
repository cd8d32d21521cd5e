"""An independent second opinion on an agent's wire: [`WireChecker`][acp_agent.testing.WireChecker].

Feed it every message of one connection, in both directions and in wire order
([`WireChecker.feed`][acp_agent.testing.WireChecker.feed], or
[`WireChecker.feed_transcript`][acp_agent.testing.WireChecker.feed_transcript] with the entries that
[`Client`][acp_agent.testing.Client] records), tell it when the client closed its sending side
([`WireChecker.feed_end`][acp_agent.testing.WireChecker.feed_end]), then call
[`WireChecker.finish`][acp_agent.testing.WireChecker.finish]. Each broken rule is reported as a
[`RuleViolation`][acp_agent.testing.RuleViolation] whose text reads ``R94 [MUST] <the rule in words>: <what happened>``,
followed by the offending messages. Rule ids ``R1``..``R113`` are the reference's (``ACP-V2-AGENT-REFERENCE.md`` §15);
``S1``, ``S2``, ... are rules this SDK adds where the reference leaves a gap; ``P2``..``P20`` are rules ACP v2
Preview added. ``docs/rules.md`` states every one of them in words. By default the first violation is raised;
``WireChecker(raise_on_violation=False)`` collects them all in
[`WireChecker.violations`][acp_agent.testing.WireChecker.violations].

The checker knows nothing about the SDK: it rebuilds what a client can know from the
messages alone (requests in flight both ways, initialization, sessions, foreground
state, background lists, tool calls, terminals, children, permission requests) and
judges only what the wire shows. [`RULES`][acp_agent.testing.RULES] lists every rule it judges with the exact
judgement; SHOULD rules ([`SHOULD_RULES`][acp_agent.testing.SHOULD_RULES]) are reported with ``level == "SHOULD"``
and can be switched off with ``ignore=SHOULD_RULES``.

Wire order matters. A transcript recorded at the client sees its own messages before
the agent can react to them, which is what the judgements assume: an agent message that
precedes a client message on the wire was sent before the agent could have seen it.

The package, bottom up: `constants` (the vocabulary, read from the bundled schema where it has it),
`rules` ([`RULES`][acp_agent.testing.RULES] and [`RuleViolation`][acp_agent.testing.RuleViolation]), `model` (the
client-side model of the connection and its sessions: state only), `judge` (the protocol every judge follows),
`shared` (judgements more than one family makes), one judge per rule family, none importing another: `jsonrpc`
(framing, ids, requests and answers), `sessions` (initialize and the session lifecycle), `turns` (prompts, messages,
foreground states, cancels), `background` (background lists, children), `items` (tool calls, terminals, permission
requests) and `preview` (what ACP v2 Preview added: idempotency keys, ``replay_complete``, prompt suggestions); then
`router` (pairs answers with requests and routes each event to the judges through written tables, in a written order)
and [`WireChecker`][acp_agent.testing.WireChecker], which puts them together behind the feed.

Judged with approximations (details in [`RULES`][acp_agent.testing.RULES]):

- R13: only structurally broken params (not an object, a required field missing or of the
  wrong JSON type) answered with a success; ``-32603`` for handler failures is invisible.
- R15 also flags a success answer to a session-scoped request (prompt, set_config_option,
  tool_call/cancel, terminal/cancel) for a session that is not open on the connection.
- R21 is only judged for requests sent while no ``initialize`` is in flight (a request
  pipelined behind ``initialize`` may legitimately be served after it).
- R35: a malformed / unknown non-``_`` ``replayFrom`` accepted, or a ``user_message(_chunk)``
  during a resume without ``replayFrom`` of a session that was not open on the connection.
- R40: a ``user_message(_chunk)`` / full ``agent_message`` / ``agent_thought`` (replay-shaped) after
  the resume snapshot, before the answer, for a session that was not open on the connection
  (live chunks and item updates may legitimately interleave; R113 judges re-announcements).
- R54: an errored prompt whose exact ``prompt`` content was echoed as a ``user_message``
  (outside a resume) under an id no successful prompt answer returned.
- R57: an accepted prompt that arrived while the session was idle, and no ``running`` /
  ``requires_action`` followed (unless the session was closed).
- R59 (the "only when" half): a ``requires_action`` stretch (up to the next other state, or the
  end) during which no request naming the session or one of its children, other than questions for
  listed background work, was pending or sent, and none was answered since the snapshot before it
  (the agent may not have read that answer yet). A stretch that a resume starts is not judged (its
  question may belong to an earlier connection). Whether the whole foreground waits (the "when"
  half) is not visible.
- R60: agent message/thought output while ``requires_action``, or a session left in
  ``requires_action`` at the end although its requests were answered.
- R61: a ``requires_action`` stretch (as for R59) in which the only questions in play named listed
  background work (a permission subject, an elicitation's ``toolCallId``, listed when it was asked),
  or were request-scoped elicitations (``requestId``).
- R62 follows the reference literally: a repeated idle MAY repeat the last stop reason, so
  only a *different* stop reason (or any ``usage``) on a repeated/resume idle is flagged.
- R68: no idle after a ``session/cancel`` of active work; or, after the idle that ends the
  cancelled work, a message chunk/update of a message that work started, or a ``cancelled``
  status for a tool call of that work (announced before the cancel, never listed, not
  covered by a listed terminal, no ``tool_call/cancel``).
- R85: a permission request (or an elicitation naming a ``toolCallId``) that was sent while its
  subject was not listed, still pending, when a ``requires_action`` snapshot starts listing the
  subject (the foreground waits on it). Anything else about "is the foreground waiting on this item"
  is not visible.
- R88: a listed tool call whose content is only ``terminal`` items, all naming terminals
  listed in the same snapshot.
- R90: a listed child whose latest known state (own ``state_update`` or the parent's mirror)
  is ``idle`` with ``background: []``; a child dropped from the list without such a state.
- R92 (SHOULD): at the end, a session (not closed) whose last list still names an item that
  was finalized afterwards.
- R105: ``output`` cleared, or a referencing tool call set to ``cancelled``, after a
  ``terminal/cancel``; an idle ``cancelled`` for work during which only per-item cancels (no
  ``session/cancel``/``close``, no answered permission request) happened. A ``session/close``
  in flight, the end of the client's input ([`WireChecker.feed_end`][acp_agent.testing.WireChecker.feed_end]), a
  ``session/cancel`` the client sent while it saw the session idle followed directly by ``running`` (the work may
  have started before the agent read the cancel), or a
  ``session/cancel`` sent after a prompt that is echoed only after it (the agent inserted the
  prompt before reading the cancel), counts as such a cancel.
- R107: a ``$/cancel_request`` sent between a ``session/cancel`` and the idle that ends it,
  for a permission request (sent before the cancel) whose subject was listed at the cancel
  and is still live.
- R110: a permission request, still pending, whose subject gets listed only after it was
  sent (in a snapshot that is not ``requires_action``, which is R85).
- R113: each item of the last snapshot before a successful resume answer needs an entity
  update between the resume request and that snapshot (a replay counts).
- While a replay (``replayFrom``) is in progress, history is re-sent: tool call transitions
  (R20, R71, R74, R97) are not judged and the last write wins; so are live patches that race
  the replay (an agent update sent before it saw the resume request).
- S1: after a terminal's ``exitStatus``, a second ``exitStatus`` (or ``null``), a new ``output``,
  ``command``, ``cwd`` or ``size``, or an output chunk; ``capabilities`` and ``_meta`` may still
  change. Resume windows re-send history and current state, so they are not judged.
- S3 (SHOULD): a message for a new or forked session sent while its ``session/new`` /
  ``session/fork`` request was in flight, before the answer that names it (legal by the reference,
  which this SDK holds stricter: acp-agent holds such updates until right after the answer).
- S2: a message naming a session id sent before the ``session/new`` / ``session/fork`` request
  whose answer returns that id (updates while that request is in flight are legal, §5.1), or
  naming an id that never becomes a session on the connection (judged at finish). Messages
  before ``initialize`` are R22's; children named before their announcement are R79's.
- P3 / P4: attempts of one ``idempotencyKey`` (in one session) that were answered with different
  ``messageId`` s (P4 when the later one was sent before the earlier one's answer, or while the
  session was not idle); the same key with another prompt may be refused ``-32602`` or answered
  with the first ``messageId``, never with a new one (P3). At the end: a key with several attempts
  whose ``messageId`` was echoed twice outside a resume, or whose prompt was echoed under a
  ``messageId`` no answer gave (P3). A keyed prompt answered with a message echoed before it (a
  retry of an attempt from an earlier connection, seen in the replay) counts as a retry; retries
  are not owed an echo or new work (R53, R57).
- P2: a key that is not a string of 1..255 characters (code points) accepted; a valid key on a
  prompt of text / resource_link blocks refused ``-32602`` although no earlier attempt of the key
  carried another prompt (R55 leaves keyed prompts to P2).
- P8..P13: per resume with ``replayFrom``, the window from the request to the answer. Replayed
  messages (``user_message``, ``agent_message``, ``agent_thought``, ``session_message``) after the
  session's marker are P8; live-only updates (chunks, ``state_update``, list and info updates)
  before it are P10 / P11, unless the session was open on the connection at the request (an update
  sent before the agent read it may still be on the wire). Each child announced in the window
  before the session's marker needs its own marker before the answer (P12); such a marker is not
  R45's although the child was closed with its parent.
- P17 / P19: ``capabilities.session.promptSuggestions`` as the ``initialize`` request sent it;
  ``image`` / ``audio`` / ``resource`` blocks need its ``image`` / ``audio`` / ``embeddedContext``.

Not judged (not visible on the wire): R4 (byte interleaving shows up as R1/R2), R5, R14,
R18, R19 (R44/R67 judge the visible part), R24, R36, R37, R38, R41 (see R42/R44/R45), R43
(see R8/R45), R48, R56 (holding vs inserting is invisible), R64, R65, R66 (R68 sees an agent that
keeps waiting, R67/R70 the withdrawal), R72,
R76 (shape; use the schema validator), R78, R82 (subjects are applied as tool call patches,
so R71/R97 see them), R86, R96, R98, R99, R108, R109; of Preview's: P1 and P6 (the key rules hold on
every connection), P7 (documentation), P14 and P16 (the v1 bridge), P15 (R12's ``-32601``), P21 (R79), P22.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from ..transcript import Direction, TranscriptEntry
from .background import BackgroundJudge
from .constants import A2C, C2A
from .items import ItemsJudge
from .jsonrpc import JsonRpcJudge
from .judge import Judge
from .model import CheckerModel, IdKey, ItemKey  # noqa: F401  (importable from here, as before the split)
from .preview import PreviewJudge
from .router import Router
from .rules import RULES, SHOULD_RULES, RuleViolation
from .sessions import SessionsJudge
from .turns import TurnsJudge

__all__ = ["RULES", "SHOULD_RULES", "RuleViolation", "WireChecker", "check_transcript"]


class WireChecker:
    """Judges one connection's messages against the rules in [`RULES`][acp_agent.testing.RULES].

    ``raise_on_violation``: raise the first violation (the default) or only collect them in
    [`violations`][acp_agent.testing.WireChecker.violations]. ``ignore`` names rules not to report (e.g.
    ``SHOULD_RULES``).
    """

    def __init__(self, *, raise_on_violation: bool = True, ignore: Collection[str] = ()) -> None:
        self._model = model = CheckerModel(raise_on_violation=raise_on_violation, ignore=ignore)
        jsonrpc = JsonRpcJudge(model)
        judges: dict[str, Judge] = {
            "jsonrpc": jsonrpc,
            "sessions": SessionsJudge(model),
            "turns": TurnsJudge(model),
            "background": BackgroundJudge(model),
            "items": ItemsJudge(model),
            "preview": PreviewJudge(model),
        }
        self._router = Router(model, jsonrpc, judges)

    @property
    def violations(self) -> list[RuleViolation]:
        """Every violation reported so far, in the order found (the first one is raised unless
        ``raise_on_violation=False``)."""
        return self._model.violations

    @property
    def rules(self) -> set[str]:
        """The rules broken so far."""
        return {v.rule for v in self.violations}

    def feed(self, direction: Direction, message: Any, raw: bytes | None = None) -> None:
        """Judge one message (the next on the wire).

        ``raw`` is the exact line as written (with or without its ``\\n``); it enables R1
        and, when ``message`` is ``None``, is parsed here. A line that is not JSON is
        passed as ``raw`` alone, or as the client's ``{"<unparsed>": text}`` marker.
        """
        if direction not in (C2A, A2C):
            raise ValueError(f"unknown direction {direction!r}")
        self._router.feed(direction, message, raw)

    def feed_line(self, direction: Direction, raw: bytes) -> None:
        """Judge one raw line (parsed here)."""
        self.feed(direction, None, raw)

    def feed_end(self, direction: Direction) -> None:
        """The stream in ``direction`` ended (after every message it carried was fed).

        ``"client->agent"``: the client closed its sending side, so the agent winds down and
        every session's work may end ``cancelled`` from here on, as under ``session/close``
        (R105 does not blame such an end on an earlier per-item cancel).
        """
        if direction not in (C2A, A2C):
            raise ValueError(f"unknown direction {direction!r}")
        if direction == C2A:
            self._model.client_ended = True

    def feed_transcript(self, entries: Iterable[TranscriptEntry], *, end_at: int | None = None) -> None:
        """Judge recorded [`TranscriptEntry`][acp_agent.testing.TranscriptEntry] items, in order.

        ``end_at``: the client closed its sending side after that many entries
        ([`Client.closed_at`][acp_agent.testing.Client.closed_at], see
        [`feed_end`][acp_agent.testing.WireChecker.feed_end]).
        """
        for n, entry in enumerate(entries):
            if n == end_at:
                self.feed_end(C2A)
            self.feed(entry.direction, entry.message)
        if end_at is not None:
            self.feed_end(C2A)  # closed after the last entry (a second call changes nothing)

    def finish(self) -> None:
        """End-of-connection checks (unanswered requests, promised follow-ups); a second call does nothing."""
        if self._model.finished:
            return
        self._model.finished = True
        self._router.finish()


def check_transcript(entries: Iterable[TranscriptEntry], *, ignore: Collection[str] = (),
                     end_at: int | None = None) -> list[RuleViolation]:
    """Judge a whole recorded transcript and return every violation (``end_at``: see
    [`WireChecker.feed_transcript`][acp_agent.testing.WireChecker.feed_transcript])."""
    checker = WireChecker(raise_on_violation=False, ignore=ignore)
    checker.feed_transcript(entries, end_at=end_at)
    checker.finish()
    return checker.violations
