"""The preview judge: the rules ACP v2 Preview added (P1..P22 of docs/rules.md) that the wire shows: idempotency keys
on ``session/prompt`` (P2..P5), the ``replay_complete`` marker of a resume with ``replayFrom`` (P8..P13) and prompt
suggestions (P17..P20)."""

from __future__ import annotations

from typing import Any

from .constants import (
    BASELINE_BLOCKS,
    HISTORY_MESSAGES,
    KEY_LENGTH,
    LIVE_KINDS,
    SUGGESTION_OPT_IN,
)
from .judge import BaseJudge
from .model import (
    Answer,
    PromptKey,
    Req,
    Resume,
    SessionModel,
    custom,
    obj,
)
from .rules import quote
from .shared import baseline_prompt, is_blank


class PreviewJudge(BaseJudge):
    """Judges idempotency keys (P2..P5), ``replay_complete`` (P8..P13) and prompt suggestions (P17..P20).

    It sees a prompt's or a resume's answer before the turns and sessions judges do (the router's order): it marks a
    keyed retry answered with the message an earlier attempt inserted (``req.extra["earlier_message"]``), which R53
    and R57 then leave alone, and it still finds the resume window the sessions judge closes.
    """

    def on_answer(self, req: Req, answer: Answer) -> None:
        """Judge a ``session/prompt`` answer (its key) or a ``session/resume`` answer (its markers)."""
        if req.method == "session/prompt":
            self._answered_prompt(req, answer)
        elif req.method == "session/resume":
            self._answered_resume(req, answer)

    def before_update(self, s: SessionModel, kind: Any, update: dict[str, Any], message: Any) -> None:
        """Place every update of a resume window against its marker: history after it (P8, P12); live updates
        (P10, P11) and suggestions (P20) before it, reported when the marker comes."""
        window = s.resume
        if window is not None and window.replay:
            self._own_window(window, kind, message)
            return
        parent = self._m.sessions.get(s.parent) if s.parent is not None else None
        outer = parent.resume if parent is not None else None
        if outer is not None and outer.replay and kind in HISTORY_MESSAGES and s.id in outer.child_markers:
            self._report(outer, "P12", f"child {s.id!r}: a replayed message after its replay_complete", message)

    def on_update(self, s: SessionModel, kind: Any, update: dict[str, Any], message: Any) -> None:
        """Judge a ``replay_complete`` (P8, P12, P13) or a ``prompt_suggestions_update`` (P17..P19)."""
        if kind == "replay_complete":
            self._marker(s, message)
        elif kind == "prompt_suggestions_update":
            self._suggestions(update, message)

    def at_end(self) -> None:
        """Judge the keys: at most one user message per key (P3)."""
        for s in self._m.sessions.values():
            for key, record in s.keys.items():
                self._p3_one_user_message(s, key, record)

    # -- idempotency keys (P2..P5) ----------------------------------------------------------------------------------

    def _answered_prompt(self, req: Req, answer: Answer) -> None:
        s = self._m.sessions.get(req.session_id or "")
        if s is None:
            return
        key = req.params.get("idempotencyKey")
        if key is not None and not self._p2_valid_key(key, req, answer):
            return
        if not answer.ok:
            if key is not None:
                s.keys.setdefault(key, PromptKey()).attempts.append(req)
                if answer.code == -32602:
                    self._p2_valid_key_refused(s, key, req, answer)
            return
        mid = answer.result.get("messageId")
        if not isinstance(mid, str) or not mid:
            return  # R52's
        if key is not None:
            record = s.keys.setdefault(key, PromptKey())
            record.attempts.append(req)
            if record.message_id is not None:
                self._attempt_of_a_known_key(s, record, req, answer, mid)
                return
            record.first, record.message_id, record.answered_at = req, mid, self._m.n
            if mid not in s.answered_ids and -1 < s.user_echo_at.get(mid, -1) < req.index:
                req.extra["earlier_message"] = True  # its first attempt was inserted on an earlier connection
                s.answered_ids[mid] = key
                return
        self._p5_new_submission(s, key, req, answer, mid)
        s.answered_ids[mid] = key

    def _p2_valid_key(self, key: Any, req: Req, answer: Answer) -> bool:
        """P2: a key is a string of 1..255 characters; another one is not accepted (``False``: it is invalid)."""
        if isinstance(key, str) and len(key) in KEY_LENGTH:
            return True
        if answer.ok:
            self._m.flag("P2", f"the invalid idempotencyKey {quote(key)} was accepted", req.message, answer.message)
        return False

    def _p2_valid_key_refused(self, s: SessionModel, key: str, req: Req, answer: Answer) -> None:
        """P2: a valid key on a prompt every agent takes is refused ``-32602`` only when it names another
        submission (an earlier attempt with another prompt, answered or in flight)."""
        if s.parent is not None or not baseline_prompt(req.params.get("prompt")):
            return  # a child refuses client prompts (§11.15); other blocks may be refused for themselves
        earlier = [r for r in s.keys[key].attempts if r.index < req.index] + [
            r for r in self._m.client_pending.values()
            if r.method == "session/prompt" and r.session_id == s.id and r.index < req.index
            and r.params.get("idempotencyKey") == key]
        if any(r.params.get("prompt") != req.params.get("prompt") for r in earlier):
            return
        self._m.flag("P2", f"a prompt with the valid idempotencyKey {key!r} was refused with -32602", req.message,
                     answer.message)

    def _attempt_of_a_known_key(self, s: SessionModel, record: PromptKey, req: Req, answer: Answer,
                                mid: str) -> None:
        """P3 / P4: another attempt of a key answered before gets that answer's ``messageId``."""
        if mid == record.message_id:
            req.extra["earlier_message"] = True
            return
        first = record.first
        assert first is not None
        if req.params.get("prompt") != first.params.get("prompt"):
            self._m.flag("P3", f"the idempotencyKey {req.params.get('idempotencyKey')!r} of another prompt was "
                               f"answered as a new message {mid!r} (refuse it -32602, or answer "
                               f"{record.message_id!r})", first.message, req.message, answer.message)
        elif req.index > record.answered_at and req.extra.get("state") in (None, "idle"):
            self._m.flag("P3", f"a retry was answered with a new messageId {mid!r}, not {record.message_id!r}",
                         first.message, req.message, answer.message)
        else:
            self._m.flag("P4", f"a duplicate sent before the first attempt was answered, or while its turn ran, got "
                               f"a new messageId ({record.message_id!r} and {mid!r})", first.message, req.message,
                         answer.message)
        req.extra["earlier_message"] = True  # judged here: not R53's or R57's as well
        record.reported = True

    def _p5_new_submission(self, s: SessionModel, key: str | None, req: Req, answer: Answer, mid: str) -> None:
        """P5: a prompt without a key, or with another key, is a new submission: a messageId of its own."""
        if mid not in s.answered_ids:
            return
        other = s.answered_ids[mid]
        req.extra["earlier_message"] = True
        self._m.flag("P5", f"a new submission (key {key!r}) was answered with {mid!r}, the messageId of an earlier "
                           f"one (key {other!r})", req.message, answer.message)

    def _p3_one_user_message(self, s: SessionModel, key: str, record: PromptKey) -> None:
        """P3: a key puts at most one user message into the conversation (judged at the end: echoes may come before
        the answers that name them)."""
        if record.message_id is None or record.first is None or len(record.attempts) < 2 or record.reported:
            return
        attempts = sorted(r.index for r in record.attempts)
        prompt = record.first.params.get("prompt")
        live = [(at, mid, content) for at, mid, content, in_resume in s.user_messages if not in_resume]
        own = [at for at, mid, _ in live if mid == record.message_id and at > attempts[0]]
        extra = [mid for at, mid, content in live if at > attempts[1] and content == prompt
                 and mid != record.message_id and mid not in s.answered_ids]
        if len(own) > 1 or extra:
            self._m.flag("P3", f"the idempotencyKey {key!r} put a second user message into {s.id!r} "
                               f"({record.message_id!r}{''.join(f', {m!r}' for m in extra)})", record.first.message)

    # -- replay_complete (P8..P13) ----------------------------------------------------------------------------------

    def _answered_resume(self, req: Req, answer: Answer) -> None:
        """P8 / P9 / P12 / P13: a successful resume with ``replayFrom`` sent its marker (and its children's) before
        the answer; a failed one sent none."""
        s = self._m.sessions.get(req.session_id or "")
        window = s.resume if s is not None and s.resume is not None and s.resume.key == req.key else None
        if s is None or window is None:
            return
        s.marker_owed = False
        if not answer.ok:
            if window.markers or window.child_markers:
                self._m.flag("P13", "replay_complete was sent for a resume that failed", req.message, answer.message)
            return
        if not isinstance(obj(req.params.get("replayFrom")).get("type"), str):
            return  # no cursor, or a malformed one (accepting that is R35's)
        if not window.markers:
            rule, what = ("P8", "the replayed history") if window.history_at >= 0 else ("P9", "an empty history")
            self._m.flag(rule, f"no replay_complete for {s.id!r} before the answer to its resume ({what})",
                         req.message, answer.message)
            s.marker_owed = True
        end = window.markers[0] if window.markers else self._m.n
        for kind, child in sorted(window.entity_at):
            if kind == "subagent" and window.entity_at[(kind, child)] < end and child not in window.child_markers:
                self._m.flag("P12", f"child {child!r}, announced by the resume, got no replay_complete",
                             req.message, answer.message)

    def _own_window(self, window: Resume, kind: Any, message: Any) -> None:
        """P8 / P10 / P11 / P20: the session's history comes before its marker, its live updates after it."""
        if kind in HISTORY_MESSAGES:
            window.history_at = self._m.n
            if window.markers:
                self._report(window, "P8", "a replayed message after replay_complete", message)
        elif window.markers or kind not in LIVE_KINDS:
            return
        elif kind == "prompt_suggestions_update":
            window.early.append(("P20", "prompt suggestions sent inside the replay (before replay_complete)", message))
        elif window.was_active:
            return  # an update sent before the agent read the request may still be on the wire (P11)
        elif kind == "state_update":
            window.early.append(("P10", "the resume's state_update came before replay_complete", message))
        else:
            window.early.append(("P11", f"a live {kind} inside the replay (before replay_complete)", message))

    def _marker(self, s: SessionModel, message: Any) -> None:
        """P8 / P12 / P13: a marker closes a replay the client asked for: its session's, once, or an announced
        child's, once."""
        window = s.resume
        if window is not None:
            if not window.replay:
                self._m.flag("P13", "replay_complete for a resume without replayFrom", message)
            elif window.markers:
                self._m.flag("P8", f"a second replay_complete for {s.id!r} in one resume", message)
            else:
                for rule, text, early in window.early:
                    self._report(window, rule, text, early, message)
            window.markers.append(self._m.n)
            return
        parent = self._m.sessions.get(s.parent) if s.parent is not None else None
        outer = parent.resume if parent is not None else None
        if outer is not None and ("subagent", s.id) in outer.entity_at:
            if not outer.replay:
                self._m.flag("P13", f"replay_complete for child {s.id!r} of a resume without replayFrom", message)
            elif s.id in outer.child_markers:
                self._m.flag("P12", f"a second replay_complete for child {s.id!r} in one resume", message)
            outer.child_markers.setdefault(s.id, self._m.n)
            return
        if s.marker_owed:
            s.marker_owed = False
            self._m.flag("P8", f"replay_complete for {s.id!r} came after the answer to its resume", message)
            return
        self._m.flag("P13", f"replay_complete for {s.id!r} outside a resume with replayFrom", message)

    def _report(self, window: Resume, rule: str, text: str, *messages: Any) -> None:
        """Report ``rule`` once per resume window (a replay out of place repeats on every update)."""
        if rule not in window.reported:
            window.reported.add(rule)
            self._m.flag(rule, text, *messages)

    # -- prompt suggestions (P17..P19) ------------------------------------------------------------------------------

    def _suggestions(self, update: dict[str, Any], message: Any) -> None:
        """P17 / P18 / P19: suggestions go only to a client that takes them, as a whole list of prompts it could
        send, in block types it opted in to."""
        accepts = obj(self._m.client_caps.get("session")).get("promptSuggestions")
        if not isinstance(accepts, dict):
            self._m.flag("P17", "prompt suggestions sent to a client without capabilities.session.promptSuggestions",
                         message)
            return
        suggestions = update.get("suggestions")
        if not isinstance(suggestions, list):
            self._m.flag("P18", "prompt_suggestions_update must carry the whole suggestions array ([] withdraws)",
                         message)
            return
        for n, suggestion in enumerate(suggestions):
            prompt = obj(suggestion).get("prompt")
            if not isinstance(prompt, list) or not prompt:
                self._m.flag("P19", f"suggestion {n} has an empty prompt", message)
            elif all(is_blank(block) for block in prompt):
                self._m.flag("P19", f"suggestion {n} is only blank text", message)
            else:
                self._p17_opted_in(n, prompt, accepts, message)

    def _p17_opted_in(self, n: int, prompt: list[Any], accepts: dict[str, Any], message: Any) -> None:
        """P17: blocks beyond text / resource_link only where the client opted in to them."""
        for block in prompt:
            kind = obj(block).get("type")
            if kind in BASELINE_BLOCKS or custom(kind):
                continue
            field_ = SUGGESTION_OPT_IN.get(kind) if isinstance(kind, str) else None
            if field_ is None or not isinstance(accepts.get(field_), dict):
                self._m.flag("P17", f"suggestion {n} holds a {kind!r} block the client did not opt in to", message)
                return
