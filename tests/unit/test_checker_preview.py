"""The wire checker's Preview rules (P2..P5 keys, P8..P13 ``replay_complete``, P17..P20 prompt suggestions): for each
a transcript that breaks exactly that rule, near misses that keep it, and the SDK's own agents judged clean."""

# Transcripts are built as ``PREFIX + [steps...]``; unpacking would make them harder to read.
# ruff: noqa: RUF005

from __future__ import annotations

from typing import Any

import pytest

from acp_agent.testing.checker import RULES, SHOULD_RULES
from tests.unit.test_checker import CHILD, MSG, OPEN, SID, TEXT, Step, err, init, new, ok, rq, run, st, up

OTHER = [{"type": "text", "text": "something else"}]


def prompt(rid: Any, key: Any = None, text: list[dict[str, Any]] = TEXT, sid: str = SID) -> Step:
    params: dict[str, Any] = {"sessionId": sid, "prompt": text}
    if key is not None:
        params["idempotencyKey"] = key
    return rq(rid, "session/prompt", **params)


def answer(rid: Any, mid: str) -> Step:
    return ok(rid, {"messageId": mid})


def echo(mid: str, text: list[dict[str, Any]] = TEXT, sid: str = SID) -> Step:
    return up("user_message", sid, messageId=mid, content=text)


def turn(mid: str, text: list[dict[str, Any]] = TEXT, sid: str = SID) -> list[Step]:
    return [echo(mid, text, sid), st("running", sid), st("idle", sid, stopReason="end_turn")]


def resume(rid: Any, sid: str = "s9", replay: bool = True) -> Step:
    params: dict[str, Any] = {"sessionId": sid, "cwd": "/p"}
    if replay:
        params["replayFrom"] = {"type": "start"}
    return rq(rid, "session/resume", **params)


def marker(sid: str = "s9") -> Step:
    return up("replay_complete", sid)


def suggest(suggestions: Any, sid: str = SID) -> Step:
    return up("prompt_suggestions_update", sid, suggestions=suggestions)


SUGGESTS = init(client_caps={"session": {"promptSuggestions": {}}}) + new()
IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
SIBLING = init() + new() + new("s2", 9)  # two sessions
CLOSED_PARENT = OPEN + [up("subagent_update", sessionId=CHILD, title="explore"),
                        rq(5, "session/close", sessionId=SID), ok(5)]  # the child is closed with its parent

BAD: list[tuple[str, list[Step], str]] = [
    # P2: a key is 1..255 characters
    ("P2", OPEN + [prompt(2, ""), answer(2, "u1")] + turn("u1"), "empty-key-accepted"),
    ("P2", OPEN + [prompt(2, "k" * 256), answer(2, "u1")] + turn("u1"), "long-key-accepted"),
    ("P2", OPEN + [prompt(2, 7), answer(2, "u1")] + turn("u1"), "number-key-accepted"),
    ("P2", OPEN + [prompt(2, "k"), err(2, -32602)], "valid-key-refused"),
    ("P2", OPEN + [prompt(2, "k"), answer(2, "u1")] + turn("u1") + [prompt(3, "k"), err(3, -32602)],
     "retry-refused"),
    # P3: at most one user message per key
    ("P3", OPEN + [prompt(2, "k"), answer(2, "u1")] + turn("u1") + [prompt(3, "k"), answer(3, "u2")] + turn("u2"),
     "retry-new-message"),
    ("P3", OPEN + [prompt(2, "k"), answer(2, "u1")] + turn("u1") + [prompt(3, "k", OTHER), answer(3, "u2")]
     + turn("u2", OTHER), "other-prompt-answered-as-new"),
    ("P3", OPEN + [prompt(2, "k"), answer(2, "u1")] + turn("u1") + [prompt(3, "k"), answer(3, "u1")] + turn("u1"),
     "second-user-message-same-id"),
    ("P3", OPEN + [prompt(2, "k"), answer(2, "u1")] + turn("u1") + [prompt(3, "k"), answer(3, "u1")] + turn("u9"),
     "second-user-message-fresh-id"),
    # P4: also while the first attempt is unanswered or its turn runs
    ("P4", OPEN + [prompt(2, "k"), prompt(3, "k"), echo("u1"), answer(2, "u1"), st("running"), echo("u2"),
                   answer(3, "u2"), st("idle", stopReason="end_turn"), st("running"),
                   st("idle", stopReason="end_turn")], "before-the-answer"),
    ("P4", OPEN + [prompt(2, "k"), echo("u1"), answer(2, "u1"), st("running"), prompt(3, "k"), echo("u2"),
                   answer(3, "u2"), st("idle", stopReason="end_turn")], "while-the-turn-runs"),
    # P5: no key, or another key: a new submission
    ("P5", OPEN + [prompt(2), answer(2, "u1")] + turn("u1") + [prompt(3), answer(3, "u1")], "no-key"),
    ("P5", OPEN + [prompt(2, "a"), answer(2, "u1")] + turn("u1") + [prompt(3, "b"), answer(3, "u1")],
     "another-key"),
    # P8 / P9: one marker, after the history, before the answer
    ("P8", init() + [resume(5), echo("u1", sid="s9"), st("idle", "s9"), ok(5)], "no-marker"),
    ("P8", init() + [resume(5), echo("u1", sid="s9"), marker(), marker(), st("idle", "s9"), ok(5)], "two-markers"),
    ("P8", init() + [resume(5), marker(), echo("u1", sid="s9"), st("idle", "s9"), ok(5)], "history-after-marker"),
    ("P8", init() + [resume(5), echo("u1", sid="s9"), st("idle", "s9"), ok(5), marker()], "marker-after-answer"),
    ("P9", init() + [resume(5), st("idle", "s9"), ok(5)], "empty-history-no-marker"),
    # P10 / P11: live state after the marker
    ("P10", init() + [resume(5), echo("u1", sid="s9"), st("idle", "s9"), marker(), ok(5)], "snapshot-first"),
    ("P11", init() + [resume(5), up("agent_message_chunk", "s9", messageId="a1",
                                    content={"type": "text", "text": "x"}), marker(), st("idle", "s9"), ok(5)],
     "live-chunk-inside-replay"),
    # P12: a marker per announced child, after its history
    ("P12", init() + [resume(5), up("subagent_update", "s9", sessionId=CHILD, title="explore"), marker(),
                      st("idle", "s9"), ok(5)], "child-without-marker"),
    ("P12", init() + [resume(5), up("subagent_update", "s9", sessionId=CHILD, title="explore"), marker(CHILD),
                      marker(CHILD), marker(), st("idle", "s9"), ok(5)], "child-two-markers"),
    ("P12", init() + [resume(5), up("subagent_update", "s9", sessionId=CHILD, title="explore"), marker(CHILD),
                      up("agent_message", CHILD, **MSG), marker(), st("idle", "s9"), ok(5)],
     "child-history-after-marker"),
    # P13: only for a resume with replayFrom that succeeds
    ("P13", init() + [resume(5, replay=False), marker(), st("idle", "s9"), ok(5)], "without-replay-from"),
    ("P13", OPEN + [marker(SID)], "outside-a-resume"),
    ("P13", init() + [resume(5), echo("u1", sid="s9"), marker(), err(5, -32603)], "failed-resume"),
    ("P13", init() + [resume(5, replay=False), up("subagent_update", "s9", sessionId=CHILD, title="explore"),
                      marker(CHILD), st("idle", "s9"), ok(5)], "child-without-replay-from"),
    # P17..P20: prompt suggestions
    ("P17", OPEN + [suggest([{"prompt": TEXT}])], "client-did-not-advertise"),
    ("P17", SUGGESTS + [suggest([{"prompt": [IMAGE]}])], "image-without-opt-in"),
    ("P18", SUGGESTS + [suggest(None)], "no-array"),
    ("P19", SUGGESTS + [suggest([{"prompt": []}])], "empty-prompt"),
    ("P19", SUGGESTS + [suggest([{"prompt": [{"type": "text", "text": " \n"}]}])], "blank-prompt"),
    ("P20", init(client_caps={"session": {"promptSuggestions": {}}}) + [
        resume(5), echo("u1", sid="s9"), suggest([{"prompt": TEXT}], "s9"), marker(), st("idle", "s9"), ok(5)],
     "suggestions-replayed"),
    # the R45 exemption is P12's: a marker for a closed child the resume did not announce is still R45's
    ("R45", CLOSED_PARENT + [resume(6, SID), marker(CHILD), marker(SID), st("idle"), ok(6)],
     "closed-child-not-announced"),
]

GOOD: list[tuple[list[Step], str]] = [
    (OPEN + [prompt(2, "k"), answer(2, "u1")] + turn("u1") + [prompt(3, "k"), answer(3, "u1")], "retry-after-answer"),
    (OPEN + [prompt(2, "k"), prompt(3, "k"), echo("u1"), answer(2, "u1"), answer(3, "u1"), st("running"),
             st("idle", stopReason="end_turn")], "duplicate-before-answer"),
    (OPEN + [prompt(2, "k"), prompt(3, "k"), echo("u1"), answer(3, "u1"), answer(2, "u1"), st("running"),
             st("idle", stopReason="end_turn")], "retry-answered-first"),
    (OPEN + [prompt(2, "k"), echo("u1"), answer(2, "u1"), st("running"), prompt(3, "k"), answer(3, "u1"),
             st("idle", stopReason="end_turn")], "retry-while-running"),
    (OPEN + [prompt(2, "k"), answer(2, "u1")] + turn("u1") + [prompt(3, "k", OTHER), err(3, -32602)],
     "other-prompt-refused"),
    (OPEN + [prompt(2, "k"), answer(2, "u1")] + turn("u1") + [prompt(3, "k", OTHER), answer(3, "u1")],
     "other-prompt-answered-original"),
    (OPEN + [prompt(2, "k"), prompt(3, "k", OTHER), err(3, -32602), answer(2, "u1")] + turn("u1"),
     "other-prompt-refused-while-held"),
    (OPEN + [prompt(2, ""), err(2, -32602), prompt(3, "k" * 256), err(3, -32602), prompt(4, "k" * 255),
             answer(4, "u1")] + turn("u1"), "key-length"),
    (OPEN + [prompt(2, "k", [{"type": "image", "data": "x", "mimeType": "image/png"}]), err(2, -32602)],
     "keyed-prompt-refused-for-its-blocks"),
    (SIBLING + [prompt(2, "k"), answer(2, "u1")] + turn("u1") + [prompt(3, "k", sid="s2"), answer(3, "u2")]
     + turn("u2", sid="s2"), "same-key-another-session"),
    (OPEN + [prompt(2, "k"), err(2, -32000), prompt(3, "k"), answer(3, "u2")] + turn("u2"), "first-attempt-failed"),
    (OPEN + [prompt(2, "a"), answer(2, "u1")] + turn("u1") + [prompt(3, "b"), answer(3, "u2")] + turn("u2")
     + [prompt(4), answer(4, "u3")] + turn("u3"), "new-submissions"),
    (init() + [resume(5), echo("u0", sid="s9"), marker(), st("idle", "s9"), ok(5), prompt(6, "k", sid="s9"),
               answer(6, "u0")], "retry-of-an-earlier-connection"),
    (init() + [resume(5), echo("u1", sid="s9"), up("agent_message", "s9", **MSG), marker(),
               up("tool_call_update", "s9", toolCallId="t1", title="x", status="completed"), st("idle", "s9"), ok(5)],
     "replay"),
    (init() + [resume(5), marker(), st("idle", "s9"), ok(5)], "empty-replay"),
    (init() + [resume(5, replay=False), st("idle", "s9"), ok(5)], "no-replay-no-marker"),
    (init() + [resume(5, replay=False), up("agent_message_chunk", "s9", messageId="a1",
                                           content={"type": "text", "text": "x"}), st("idle", "s9"), ok(5)],
     "no-replay-live"),
    (init() + [resume(5), up("subagent_update", "s9", sessionId=CHILD, title="explore"),
               up("agent_message", CHILD, **MSG), marker(CHILD), marker(), st("idle", "s9"), ok(5)], "child"),
    (CLOSED_PARENT + [resume(6, SID), up("subagent_update", SID, sessionId=CHILD, title="explore"), marker(CHILD),
                      marker(SID), st("idle"), ok(6)], "closed-child-announced"),
    (OPEN + [st("running"), resume(5, SID), up("agent_message_chunk", messageId="a1",
                                             content={"type": "text", "text": "x"}),
             echo("u1"), marker(SID), st("running"), ok(5)], "open-session-live-update-in-flight"),
    (SUGGESTS + [suggest([{"prompt": TEXT}, {"prompt": [{"type": "resource_link", "name": "a", "uri": "file:///a"}]}]),
                 suggest([])], "suggestions"),
    (init(client_caps={"session": {"promptSuggestions": {"image": {}}}}) + new() + [suggest([{"prompt": [IMAGE]}])],
     "image-opted-in"),
    (SUGGESTS + [resume(5, SID), echo("u1"), marker(SID), st("idle"), suggest([{"prompt": TEXT}]), ok(5)],
     "suggestions-after-the-marker"),
]


@pytest.mark.parametrize(("rule", "steps"), [pytest.param(r, s, id=f"{r}-{i}") for r, s, i in BAD])
def test_each_preview_rule_is_caught(rule: str, steps: list[Step]) -> None:
    checker = run(steps)
    assert checker.rules == {rule}, [str(v) for v in checker.violations]
    for violation in checker.violations:
        assert violation.level == ("SHOULD" if rule in SHOULD_RULES else "MUST")
        assert str(violation).startswith(f"{rule} [{violation.level}] {RULES[rule]}: ")
        assert f"(see docs/rules.md#{rule.lower()})" in str(violation)


@pytest.mark.parametrize("steps", [pytest.param(s, id=i) for s, i in GOOD])
def test_preview_near_misses_are_clean(steps: list[Step]) -> None:
    checker = run(steps)
    assert checker.violations == [], [str(v) for v in checker.violations]


def test_every_preview_rule_has_a_breaking_transcript() -> None:
    assert {rule for rule, _, _ in BAD if rule.startswith("P")} == {rule for rule in RULES if rule.startswith("P")}
