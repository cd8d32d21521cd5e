"""The turns judge: prompts, message updates, foreground states, idles and session/cancel."""

from __future__ import annotations

from typing import Any

from .constants import (
    AGENT_OUTPUT,
    FINAL,
    MESSAGE_KINDS,
    REPLAY_SHAPED,
    STOP_REASONS,
    USER_MESSAGES,
    foreground_states,
    update_kinds,
)
from .judge import BaseJudge
from .model import (
    Answer,
    Blocked,
    Cancel,
    Req,
    Resume,
    SessionModel,
    custom,
    for_background,
    is_request_scoped,
    state_snapshot,
)
from .shared import baseline_prompt, check_commands, check_config_values


class TurnsJudge(BaseJudge):
    """Judges prompts, message updates, foreground states, idles and session/cancel."""

    def on_answer(self, req: Req, answer: Answer) -> None:
        """Judge a ``session/prompt`` answer."""
        if req.method == "session/prompt":
            self._answered_prompt(req, answer)

    def at_session_end(self, s: SessionModel) -> None:
        """Judge how a session's turn was left: blocked (R59, R61), stuck (R60), never idle after a cancel (R68)."""
        self._r59_r61_blocked_ends(s, None)
        self._r60_stuck(s)
        self._r68_no_idle(s)

    def at_end(self) -> None:
        """Judge the prompts: echoed (R53), errored ones not echoed (R54), work started (R57)."""
        self._r53_echoes()
        self._r54_rejected_echoes()
        self._r57_prompt_work()

    def _r35_unrequested_replay(self, s: SessionModel, window: Resume, message: Any) -> None:
        """R35: no message replay without ``replayFrom`` (session not open before the resume)."""
        if not window.replay and not window.was_active and not window.flagged:
            window.flagged = True
            self._m.flag("R35", "messages replayed on a resume without replayFrom", message)

    def _answered_prompt(self, req: Req, answer: Answer) -> None:
        """Judge a ``session/prompt`` answer and remember the prompt for the echo rules."""
        if answer.ok:
            mid = self._r52_message_id(req, answer)
            s = self._m.sessions.get(req.session_id or "")
            # A keyed retry answered with the message an earlier attempt inserted (or a messageId given out before,
            # P5's): the preview judge (which saw the answer first) marked it; no echo or new work is owed for it.
            if mid is not None and not req.extra.get("earlier_message"):
                self._m.prompts.append((req, mid))
                if s is not None:
                    s.prompt_ids.add(mid)
        else:
            self._m.failed_prompts.append(req)
            self._r55_baseline_blocks(req, answer)

    def _r52_message_id(self, req: Req, answer: Answer) -> str | None:
        """R52: the prompt answer carries the inserted message's ``messageId``."""
        mid = answer.result.get("messageId")
        if not isinstance(mid, str) or not mid:
            self._m.flag("R52", "session/prompt must be answered with a messageId", req.message, answer.message)
            return None
        return mid

    def _r55_baseline_blocks(self, req: Req, answer: Answer) -> None:
        """R55: ``text`` and ``resource_link`` blocks are always accepted."""
        if answer.code != -32602 or not baseline_prompt(req.params.get("prompt")):
            return
        if req.params.get("idempotencyKey") is not None:
            return  # a keyed prompt may be refused for its key: P2 judges it (the preview judge)
        target = self._m.sessions.get(req.session_id or "")
        if target is not None and target.parent is not None:
            return  # a child session refuses client prompts (§11.15)
        self._m.flag("R55", "a prompt of text/resource_link blocks was rejected with -32602", req.message,
                     answer.message)

    def _r53_echoes(self) -> None:
        """R53: every accepted prompt's ``messageId`` is echoed as a user message in its session."""
        for req, mid in self._m.prompts:
            s = self._m.sessions.get(req.session_id or "")
            if s is None or s.user_echo_at.get(mid, -1) < req.index:
                self._m.flag("R53", f"prompt accepted as {mid!r} but never echoed as user_message", req.message)

    def _r54_rejected_echoes(self) -> None:
        """R54: a prompt answered with an error produced no user message."""
        for req in self._m.failed_prompts:
            s = self._m.sessions.get(req.session_id or "")
            if s is None:
                continue
            content = req.params.get("prompt")
            for at, mid, echoed, in_resume in s.user_messages:
                if at > req.index and not in_resume and mid not in s.prompt_ids and echoed == content:
                    self._m.flag("R54", f"an errored prompt was echoed as user message {mid!r}", req.message)
                    break

    def _r57_prompt_work(self) -> None:
        """R57: an accepted prompt on an idle session starts foreground work (running/requires_action)."""
        for req, mid in self._m.prompts:
            s = self._m.sessions.get(req.session_id or "")
            if s is None or req.extra.get("state") != "idle":
                continue
            if s.last_active_at < req.index and s.closed_at < req.index:
                self._m.flag("R57", f"prompt {mid!r} accepted but no running/requires_action followed", req.message)

    def before_update(self, s: SessionModel, kind: Any, update: dict[str, Any], message: Any) -> None:
        """Judge what every update shows: its kind (R84), a removal followed by ``running`` (R95), a replay (R35),
        a state's value (R63)."""
        candidate, s.r95 = s.r95, None
        if kind not in update_kinds() and not custom(kind):
            self._m.flag("R84", f"unknown sessionUpdate {kind!r} without the _ prefix", message)
        self._r95_quiet_then_running(candidate, update, message)
        window = s.resume
        if window is not None and kind in REPLAY_SHAPED:
            window.last_replay = self._m.n
            if kind in USER_MESSAGES:
                self._r35_unrequested_replay(s, window, message)
        if kind == "state_update":
            self._r63_state_value(update.get("state"), message)

    def on_update(self, s: SessionModel, kind: Any, update: dict[str, Any], message: Any) -> None:
        """Take a message update, a ``state_update`` (after its list was judged) or a list update (R51)."""
        if kind in MESSAGE_KINDS:
            self._message_update(s, kind, update, message)
        elif kind == "state_update":
            self._state_update(s, update, message)
        elif kind == "available_commands_update":
            self._r51_complete(update, "availableCommands", message)
        elif kind == "config_option_update":
            self._r51_complete(update, "configOptions", message)

    def _r51_complete(self, update: dict[str, Any], name: str, message: Any) -> None:
        """R51: list updates carry the complete array."""
        value = update.get(name)
        if not isinstance(value, list):
            self._m.flag("R51", f"{update.get('sessionUpdate')} must carry the complete {name} array", message)
        elif name == "availableCommands":
            check_commands(self._m, value, message)
        else:
            check_config_values(self._m, value, message)

    def _r95_quiet_then_running(self, candidate: Any, update: dict[str, Any], message: Any) -> None:
        """R95: a removal snapshot ``idle`` + ``[]`` is not followed at once by ``running``."""
        if candidate is not None and update.get("sessionUpdate") == "state_update" and update.get(
                "state") == "running":
            self._m.flag("R95", "idle + [] removal immediately followed by running (say running in the removal)",
                         candidate, message)

    def _message_update(self, s: SessionModel, kind: str, update: dict[str, Any], message: Any) -> None:
        mid = self._r73_message_id(update.get("messageId"), message)
        if mid is None:
            return
        for field_ in ("senderSessionId", "recipientSessionId"):
            self._m.note_early(update.get(field_), message)
        in_resume = s.resume is not None
        if kind.startswith("user_message"):
            s.user_echo_at[mid] = self._m.n
            if any(m == mid and req.session_id == s.id and req.index < s.last_cancel_at for req, m in self._m.prompts):
                # Sent before a session/cancel, inserted after it: the cancel may end this prompt's turn.
                s.cancelled_prompt_echoed = True
            if kind == "user_message":
                s.user_messages.append((self._m.n, mid, update.get("content"), in_resume))
        elif kind in AGENT_OUTPUT and not in_resume:
            self._r68_after_cancel_message(s, mid, message)
            self._r60_output_while_blocked(s, message)
            if s.state not in (None, "idle"):
                s.work_message_ids.add(mid)

    def _r73_message_id(self, mid: Any, message: Any) -> str | None:
        """R73: every message update / chunk carries a ``messageId``."""
        if not isinstance(mid, str) or not mid:
            self._m.flag("R73", "message update without a messageId", message)
            return None
        return mid

    def _r68_after_cancel_message(self, s: SessionModel, mid: str, message: Any) -> None:
        """R68: a message of the cancelled work continues after the idle that ended it."""
        if mid in s.cancelled_message_ids:
            self._m.flag("R68", f"message {mid!r} of cancelled work continues after its idle", message)

    def _r60_output_while_blocked(self, s: SessionModel, message: Any) -> None:
        """R60: work that continues after ``requires_action`` reports ``running`` first."""
        if s.state == "requires_action":
            self._m.flag("R60", "agent output while requires_action (report running once work continues)", message)

    def _state_update(self, s: SessionModel, update: dict[str, Any], message: Any) -> None:
        state = update.get("state")
        keys = s.last_list if isinstance(update.get("background"), list) else None  # the background judge took it
        prev = s.state
        if isinstance(state, str) and state != "requires_action" and s.blocked is not None:
            self._r59_r61_blocked_ends(s, message)
        if state == "idle":
            self._idle(s, update, message, prev)
        elif isinstance(state, str):
            if prev in (None, "idle"):
                s.work_message_ids = set()
                s.session_cancel_since_work = s.item_cancel_since_work = False
                s.permission_answered_since_work = False
                s.early_cancel = s.cancel_for_next or s.cancelled_prompt_echoed
                s.cancel_for_next = s.cancelled_prompt_echoed = False
            s.last_active_at = self._m.n
            if state == "requires_action" and prev != "requires_action":
                s.requires_action_at = self._m.n
                s.blocked = self._blocked_starts(s, message)
        if isinstance(state, str):
            s.state = state
        s.state_at = self._m.n
        s.cancel_for_next = False  # only the very next snapshot can show work the cancel reached
        if s.cancel is not None and not s.cancel.was_active:
            s.cancel = None
        s.own_state = state_snapshot(update)
        if s.parent is not None:
            s.child_state = s.own_state
            s.child_state_at = self._m.n
        if s.resume is not None:
            s.resume.snapshots.append((self._m.n, message, keys))

    def _blocked_starts(self, s: SessionModel, message: Any) -> Blocked:
        """A ``requires_action`` stretch starts: note the questions already in play (R59, R61).

        A question answered since the session's previous snapshot counts too: the agent may have
        reported ``requires_action`` before it read that answer (wire order is the client's).
        """
        pending = [r for r in self._m.agent_pending.values() if not r.withdrawn]
        mine = [r for r in pending if r.session_id is not None and s.id in self._m.lineage(r.session_id)]
        asked = s.request_answered_at > s.state_at or any(not for_background(r) for r in mine)
        return Blocked(message, asked, s.resume is not None, [r.message for r in mine if for_background(r)],
                        [r.message for r in pending if is_request_scoped(r)])

    def _r59_r61_blocked_ends(self, s: SessionModel, message: Any) -> None:
        """R59 / R61: a ``requires_action`` stretch had a question of the session waiting on the user."""
        blocked, s.blocked = s.blocked, None
        if blocked is None or blocked.asked or blocked.exempt:
            return
        ending = () if message is None else (message,)
        if blocked.background:
            self._m.flag("R61", "requires_action while only questions for listed background work waited",
                         *blocked.background, blocked.message, *ending)
        elif blocked.request_scoped:
            self._m.flag("R61", "requires_action while only a request-scoped elicitation waited on the user",
                         *blocked.request_scoped, blocked.message, *ending)
        else:
            self._m.flag("R59", "requires_action while no question of the session waited on the user",
                         blocked.message, *ending)

    def _r63_state_value(self, state: Any, message: Any) -> None:
        """R63: standard states (or ``custom``)."""
        if not isinstance(state, str) or (state not in foreground_states() and not custom(state)):
            self._m.flag("R63", f"unknown state {state!r}", message)

    def _idle(self, s: SessionModel, update: dict[str, Any], message: Any, prev: str | None) -> None:
        reason = update.get("stopReason")
        self._r84_stop_reason(reason, message)
        if s.resume is not None or prev == "idle":
            self._r62_repeated_idle(s, update, message, prev)
        elif prev is not None:
            self._r58_stop_reason(update, message)
            if isinstance(reason, str):
                s.last_stop_reason = reason
            if s.cancel is not None and s.cancel.was_active:
                self._cancelled_work_ends(s, reason, message)
            self._r105_foreground_kept(s, reason, message)
        s.cancel = None
        s.early_cancel = False

    def _r84_stop_reason(self, reason: Any, message: Any) -> None:
        """R84: stop reasons are standard or ``custom``."""
        if reason is not None and (not isinstance(reason, str) or (reason not in STOP_REASONS and not custom(
                reason))):
            self._m.flag("R84", f"unknown stopReason {reason!r} without the _ prefix", message)

    def _r62_repeated_idle(self, s: SessionModel, update: dict[str, Any], message: Any, prev: str | None) -> None:
        """R62: a repeated / resume idle presents no new completion and no usage."""
        if update.get("usage") is not None:
            self._m.flag("R62", "usage on a repeated or resume idle", message)
        reason = update.get("stopReason")
        if prev == "idle" and reason is not None and reason != s.last_stop_reason:
            self._m.flag("R62", f"repeated idle presents a new stop reason {reason!r}", message)

    def _r58_stop_reason(self, update: dict[str, Any], message: Any) -> None:
        """R58: the idle that ends work carries a stop reason (and ``error`` for ``"error"``)."""
        reason = update.get("stopReason")
        if reason is None:
            self._m.flag("R58", "the idle that ends work has no stopReason", message)
        elif reason == "error" and not isinstance(update.get("error"), dict):
            self._m.flag("R58", "stopReason error without an error object", message)

    def _cancelled_work_ends(self, s: SessionModel, reason: Any, message: Any) -> None:
        cancel = s.cancel
        assert cancel is not None
        self._r69_not_error(cancel, reason, message)
        self._r67_r70_withdrawn(s, cancel, message)
        s.cancelled_message_ids |= cancel.message_ids
        covered = self._m.covered(s, [k for k in s.ever_listed if k[0] == "terminal"])
        s.cancelled_tool_calls |= {
            tid for tid, tc in s.tool_calls.items()
            if tc.announced_at < cancel.index and tc.status not in FINAL and not tc.cancel_requested
            and ("tool_call", tid) not in s.ever_listed and ("tool_call", tid) not in covered
        }

    def _r69_not_error(self, cancel: Cancel, reason: Any, message: Any) -> None:
        """R69: cancelled work ends ``cancelled``, never ``error``."""
        if reason == "error":
            self._m.flag("R69", "work cancelled by session/cancel ended with stopReason error", cancel.message,
                         message)

    def _r67_r70_withdrawn(self, s: SessionModel, cancel: Cancel, message: Any) -> None:
        """R67 / R70: the cancelled work's pending requests were withdrawn with ``$/cancel_request``."""
        for req in self._m.pending_of(s):
            if req.index < cancel.index and not (req.refs & cancel.listed):
                rule = "R70" if req.method == "elicitation/create" else "R67"
                self._m.flag(rule, "request of cancelled work still pending (not withdrawn) at its idle",
                             req.message, message)

    def _r105_foreground_kept(self, s: SessionModel, reason: Any, message: Any) -> None:
        """R105: per-item cancels alone do not end the foreground work as ``cancelled``."""
        if (reason == "cancelled" and s.item_cancel_since_work and not s.session_cancel_since_work
                and not s.permission_answered_since_work and not self._m.closing(s) and not s.early_cancel):
            self._m.flag("R105", "foreground ended cancelled after a per-item cancel only", message)

    def _r60_stuck(self, s: SessionModel) -> None:
        """R60: not left in ``requires_action`` after the user answered."""
        if (s.state == "requires_action" and not s.closed and not self._m.pending_of(s)
                and s.request_answered_at > s.requires_action_at):
            self._m.flag("R60", f"session {s.id!r} left in requires_action after its requests were answered")

    def _r68_no_idle(self, s: SessionModel) -> None:
        """R68: ``session/cancel`` of active work ends with an idle."""
        if s.cancel is not None and s.cancel.was_active and not s.closed:
            self._m.flag("R68", f"no idle after session/cancel of active work in {s.id!r}", s.cancel.message)

