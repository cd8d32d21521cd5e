"""The items judge: tool calls, terminals and the questions (permission requests, elicitations) about them."""

from __future__ import annotations

from typing import Any

from .constants import (
    FINAL,
    tool_call_statuses,
    tool_kinds,
)
from .judge import BaseJudge
from .model import (
    Answer,
    ItemKey,
    Req,
    SessionModel,
    TerminalModel,
    ToolCallModel,
    custom,
    for_background,
    is_abs,
    is_base64,
    is_request_scoped,
    obj,
)
from .shared import check_path


class ItemsJudge(BaseJudge):
    """Judges tool calls, terminals and the questions (permission requests, elicitations) about them."""

    def on_request(self, req: Req) -> None:
        """Take an agent request: a permission request's or elicitation's subject (R81, R83), the question in play."""
        s = self._m.sessions.get(req.session_id) if req.session_id is not None else None
        if req.method == "session/request_permission" and s is not None:
            self._permission_request(s, req)
        elif req.method == "elicitation/create":
            self._r83_elicitation_mode(req)
            tool = req.params.get("toolCallId")
            req.refs = frozenset({("tool_call", tool)} if isinstance(tool, str) else ())
            if s is not None:
                req.listed_at_send = frozenset(req.refs & self._m.covered(s, s.last_list or []))
        self._note_question(req)

    def on_withdrawn(self, req: Req, message: Any) -> None:
        """Judge the agent's withdrawal of a permission request (R107)."""
        self._r107_kept_open(req, message)

    def on_answer(self, req: Req, answer: Answer) -> None:
        """Judge the answer to ``tool_call/cancel`` or ``terminal/cancel``."""
        if req.method == "tool_call/cancel":
            self._answered_tool_call_cancel(req, answer)
        elif req.method == "terminal/cancel":
            self._answered_terminal_cancel(req, answer)

    def on_update(self, s: SessionModel, kind: Any, update: dict[str, Any], message: Any) -> None:
        """Apply and judge a tool call or terminal update."""
        if kind == "tool_call_update":
            self._tool_patch(s, update, message)
        elif kind == "tool_call_content_chunk":
            self._tool_chunk(s, update, message)
        elif kind in ("terminal_update", "terminal_output_chunk"):
            self._terminal_update(s, kind, update, message)

    def at_end(self) -> None:
        """Judge the accepted per-item cancels that were never confirmed (R101, R103)."""
        self._r101_r103_confirmations()

    def _note_question(self, req: Req) -> None:
        """A request the agent sent is in play for the ``requires_action`` stretches it can explain."""
        if req.session_id is not None:
            for sid in self._m.lineage(req.session_id):
                blocked = self._m.sessions[sid].blocked if sid in self._m.sessions else None
                if blocked is None:
                    continue
                if for_background(req):
                    blocked.background.append(req.message)
                else:
                    blocked.asked = True
        elif is_request_scoped(req):
            for s in self._m.sessions.values():
                if s.blocked is not None:
                    s.blocked.request_scoped.append(req.message)

    def _r83_elicitation_mode(self, req: Req) -> None:
        """R83: only elicitation modes the client advertised."""
        mode = req.params.get("mode")
        caps = obj(self._m.client_caps.get("elicitation"))
        if mode in ("form", "url") and not isinstance(caps.get(mode), dict):
            self._m.flag("R83", f"elicitation mode {mode!r} was not advertised by the client", req.message)
        properties = obj(obj(req.params.get("requestedSchema")).get("properties"))
        secrets = [name for name, prop in properties.items() if obj(prop).get("format") == "password"]
        if mode == "form" and secrets:
            self._m.flag("R83", f"a form asks for a secret (password property {secrets[0]!r})", req.message)

    def _permission_request(self, s: SessionModel, req: Req) -> None:
        """Record a ``session/request_permission`` and what its subject names (R81, R110)."""
        self._r81_permission_shape(req)
        subject = obj(req.params.get("subject"))
        refs: set[ItemKey] = set()
        if subject.get("type") == "tool_call":
            patch = obj(subject.get("toolCall"))
            if isinstance(patch.get("toolCallId"), str):
                refs.add(("tool_call", patch["toolCallId"]))
                self._tool_patch(s, patch, req.message, from_subject=True)
        elif subject.get("type") == "command":
            if isinstance(subject.get("toolCallId"), str):
                refs.add(("tool_call", subject["toolCallId"]))
            if isinstance(subject.get("terminalId"), str):
                refs.add(("terminal", subject["terminalId"]))
        req.refs = frozenset(refs)
        req.listed_at_send = frozenset(refs & self._m.covered(s, s.last_list or []))

    def _r81_permission_shape(self, req: Req) -> None:
        """R81: a title, >= 1 option with unique optionIds, command subjects with command and absolute cwd."""
        params = req.params
        if not isinstance(params.get("title"), str) or not params["title"]:
            self._m.flag("R81", "permission request without a title", req.message)
        options = params.get("options")
        if not isinstance(options, list) or not options:
            self._m.flag("R81", "permission request without options", req.message)
            return
        ids = [obj(o).get("optionId") for o in options]
        if any(not isinstance(i, str) for i in ids) or len(set(ids)) != len(ids):
            self._m.flag("R81", "permission options need unique string optionIds", req.message)
        subject = obj(params.get("subject"))
        if subject.get("type") == "command" and (
            not isinstance(subject.get("command"), str) or not is_abs(subject.get("cwd"))
        ):
            self._m.flag("R81", "a command subject needs a command and an absolute cwd", req.message)

    def _r107_kept_open(self, req: Req, message: Any) -> None:
        """R107: session/cancel leaves permission requests for listed work open."""
        s = self._m.sessions.get(req.session_id or "")
        if s is None or s.cancel is None or req.method != "session/request_permission" or req.index > s.cancel.index:
            return
        live = {k for k in req.refs & s.cancel.listed if self._m.live(s, k)}
        if live:
            self._m.flag("R107", f"request for listed work {sorted(live)} withdrawn after session/cancel",
                         req.message, s.cancel.message, message)

    def _answered_tool_call_cancel(self, req: Req, answer: Answer) -> None:
        """Judge the answer to ``tool_call/cancel`` and note an accepted cancel (R102)."""
        s = self._m.sessions.get(req.session_id or "")
        tid = str(req.params.get("toolCallId"))
        if not answer.ok or s is None:
            return
        if self._r102_accept(req, answer):
            self._m.accepted_cancels.append((req, "tool_call", s.id, tid))
        s.item_cancel_since_work = True
        if tid in s.tool_calls:
            s.tool_calls[tid].cancel_requested = True

    def _r102_accept(self, req: Req, answer: Answer) -> bool:
        """R102: ``tool_call/cancel`` is not accepted for unknown, final or non-cancellable tool calls."""
        item = req.extra.get("item")
        if item is None or item[0] or not item[1]:
            self._m.flag("R102", "tool_call/cancel accepted for an unknown, final or non-cancellable tool call",
                         req.message, answer.message)
            return False
        return True

    def _answered_terminal_cancel(self, req: Req, answer: Answer) -> None:
        """Judge the answer to ``terminal/cancel`` and note an accepted cancel (R104)."""
        s = self._m.sessions.get(req.session_id or "")
        tid = str(req.params.get("terminalId"))
        if s is not None and not answer.ok and tid in s.terminals:
            s.terminals[tid].cancelled = False  # rejected: nothing was cancelled
        if not answer.ok or s is None:
            return
        if self._r104_accept(req, answer):
            self._m.accepted_cancels.append((req, "terminal", s.id, tid))
        s.item_cancel_since_work = True
        if tid in s.terminals:
            s.terminals[tid].cancelled = True

    def _r104_accept(self, req: Req, answer: Answer) -> bool:
        """R104: ``terminal/cancel`` is not accepted for unknown, exited or non-cancellable terminals."""
        item = req.extra.get("item")
        if item is None or item[0] or not item[1]:
            self._m.flag("R104", "terminal/cancel accepted for an unknown, exited or non-cancellable terminal",
                         req.message, answer.message)
            return False
        return True

    def _r101_r103_confirmations(self) -> None:
        """R101 / R103: an accepted per-item cancel is confirmed by a final status / ``exitStatus``."""
        for req, kind, sid, item in self._m.accepted_cancels:
            s = self._m.sessions[sid]
            if s.closed_at > req.index:
                continue
            if kind == "tool_call":
                tc = s.tool_calls.get(item)
                if tc is None or tc.final_at is None or tc.final_at < req.index:
                    self._m.flag("R101", f"tool_call/cancel accepted but {item!r} never got a final status",
                                 req.message)
            else:
                term = s.terminals.get(item)
                if term is None or term.exited_at is None or term.exited_at < req.index:
                    self._m.flag("R103", f"terminal/cancel accepted but {item!r} never reported exitStatus",
                                 req.message)

    def _tool_patch(self, s: SessionModel, patch: dict[str, Any], message: Any, from_subject: bool = False) -> None:
        """Apply and judge one ``tool_call_update`` patch (R34, R71, R74, R97, R105, R106)."""
        tid = patch.get("toolCallId")
        if not isinstance(tid, str):
            return
        tc = s.tool_calls.get(tid)
        if tc is None:
            tc = s.tool_calls[tid] = ToolCallModel(self._m.n)
            if not from_subject and not self._m.replaying(s):
                self._r74_title(patch, message)
        if s.resume is not None:
            s.resume.entity_at.setdefault(("tool_call", tid), self._m.n)
        if patch.get("kind") is not None and patch["kind"] not in tool_kinds() and not custom(patch["kind"]):
            self._m.flag("R84", f"unknown tool kind {patch['kind']!r} without the _ prefix", message)
        if "status" in patch:
            self._tool_status(s, tid, tc, patch["status"], message)
        if "capabilities" in patch:
            tc.cancel = isinstance(obj(patch["capabilities"]).get("cancel"), dict)
        if "content" in patch:
            tc.content = list(patch["content"]) if isinstance(patch["content"], list) else []
            self._r34_content_paths(patch["content"], message)
        locations = patch.get("locations")
        for location in locations if isinstance(locations, list) else []:
            check_path(self._m, obj(location).get("path"), message, "location path")

    def _r74_title(self, patch: dict[str, Any], message: Any) -> None:
        """R74: the first ``tool_call_update`` of a tool call has a ``title``."""
        if not isinstance(patch.get("title"), str):
            self._m.flag("R74", "the first tool_call_update has no title", message)

    def _tool_status(self, s: SessionModel, tid: str, tc: ToolCallModel, status: Any, message: Any) -> None:
        if status is not None and not isinstance(status, str):
            return
        if status is not None and status not in tool_call_statuses() and not custom(status):
            self._m.flag("R84", f"unknown tool call status {status!r} without the _ prefix", message)
        if self._m.replaying(s):
            tc.status = status or "pending"
            tc.started = tc.started or tc.status != "pending"
            if tc.status in FINAL and tc.final_at is None:
                tc.final_at = self._m.n
            return
        if status is None:
            self._r71_null_status(tc, message)
            status = "pending"
        else:
            self._r97_transition(tc, status, message)
        if status != tc.status:
            self._r20_denied_started(tc, status, message)
            if status == "cancelled" and s.resume is None:
                self._r68_after_cancel_tool(s, tid, message)
                self._r106_listed_kept(s, tid, tc, message)
                self._r105_tool_kept(s, tc, message)
        tc.status = status
        if status != "pending":
            tc.started = True
        if status in FINAL and tc.final_at is None:
            tc.final_at = self._m.n

    def _r71_null_status(self, tc: ToolCallModel, message: Any) -> None:
        """R71: ``status: null`` (reset to pending) is never sent once a tool call started."""
        if tc.started:
            self._m.flag("R71", "status: null resets a started tool call to pending", message)

    def _r97_transition(self, tc: ToolCallModel, status: str, message: Any) -> None:
        """R97: no way back to ``pending``, no change after a final status."""
        if status == tc.status:
            return
        if tc.status in FINAL:
            self._m.flag("R97", f"status changed from final {tc.status!r} to {status!r}", message)
        elif status == "pending" and tc.started:
            self._m.flag("R97", f"status went back from {tc.status!r} to pending", message)

    def _r20_denied_started(self, tc: ToolCallModel, status: str, message: Any) -> None:
        """R20: a tool call whose permission was refused does not start."""
        if tc.denied and tc.status == "pending" and status == "in_progress":
            self._m.flag("R20", "tool call started although its permission was not granted", message)

    def _r68_after_cancel_tool(self, s: SessionModel, tid: str, message: Any) -> None:
        """R68: final statuses of the cancelled work precede its idle."""
        if tid in s.cancelled_tool_calls:
            self._m.flag("R68", f"tool call {tid!r} of cancelled work reported cancelled after its idle", message)

    def _r106_listed_kept(self, s: SessionModel, tid: str, tc: ToolCallModel, message: Any) -> None:
        """R106: ``session/cancel`` leaves listed tool calls running."""
        if s.cancel is not None and ("tool_call", tid) in s.cancel.listed and not tc.cancel_requested:
            self._m.flag("R106", f"listed tool call {tid!r} cancelled by session/cancel", s.cancel.message, message)

    def _r105_tool_kept(self, s: SessionModel, tc: ToolCallModel, message: Any) -> None:
        """R105: ``terminal/cancel`` does not change the status of a referencing tool call."""
        cancelled = {t for t in tc.terminals() if t in s.terminals and s.terminals[t].cancelled}
        if (cancelled and not tc.cancel_requested and s.cancel is None and not s.early_cancel
                and not self._m.closing(s)):
            self._m.flag("R105", f"tool call cancelled because terminal(s) {sorted(cancelled)} were cancelled",
                         message)

    def _tool_chunk(self, s: SessionModel, update: dict[str, Any], message: Any) -> None:
        """Apply and judge one ``tool_call_content_chunk``."""
        tid = update.get("toolCallId")
        if not isinstance(tid, str):
            return
        tc = s.tool_calls.get(tid)
        if tc is None:
            tc = s.tool_calls[tid] = ToolCallModel(self._m.n)
        tc.content.append(update.get("content"))
        self._r34_content_paths([update.get("content")], message)

    def _r34_content_paths(self, content: Any, message: Any) -> None:
        """R34: diff paths in tool call content are absolute."""
        for item in content if isinstance(content, list) else []:
            if obj(item).get("type") != "diff":
                continue
            changes = obj(item).get("changes")
            for change in changes if isinstance(changes, list) else []:
                for name in ("path", "oldPath"):
                    if name in obj(change):
                        check_path(self._m, obj(change)[name], message, f"diff {name}")

    def _terminal_update(self, s: SessionModel, kind: str, update: dict[str, Any], message: Any) -> None:
        """Apply and judge a ``terminal_update`` or ``terminal_output_chunk`` (R34, R75, R105, S1)."""
        tid = update.get("terminalId")
        if not isinstance(tid, str):
            return
        term = s.terminals.get(tid)
        if kind == "terminal_output_chunk":
            self._r75_base64(update.get("data"), message)
            if term is not None:
                self._s1_after_exit(s, tid, term, update, message)
            return
        if term is None:
            term = s.terminals[tid] = TerminalModel(self._m.n)
        if s.resume is not None:
            s.resume.entity_at.setdefault(("terminal", tid), self._m.n)
        self._s1_after_exit(s, tid, term, update, message)
        if "exitStatus" in update:
            if isinstance(update["exitStatus"], dict):
                if not term.exited:
                    term.exited_at = self._m.n
                term.exited = True
            elif update["exitStatus"] is None:
                term.exited = False
        if "capabilities" in update:
            term.cancel = isinstance(obj(update["capabilities"]).get("cancel"), dict)
        if update.get("cwd") is not None:
            check_path(self._m, update["cwd"], message, "terminal cwd")
        if "output" in update:
            output = update["output"]
            self._r105_output_kept(term, output, message)
            if isinstance(output, dict):
                self._r75_base64(output.get("data"), message)

    def _s1_after_exit(self, s: SessionModel, tid: str, term: TerminalModel, update: dict[str, Any],
                       message: Any) -> None:
        """S1: once exited, a terminal reports no second exit, no output and no other change.

        ``capabilities`` (clearing ``cancel``, R100) and ``_meta`` may follow. A resume window
        re-sends history (replay) and current state (re-announcement), so it is not judged.
        """
        if not term.exited or s.resume is not None:
            return
        if update.get("sessionUpdate") == "terminal_output_chunk":
            what = "got an output chunk after its exit"
        elif "exitStatus" in update:
            what = ("reported exitStatus a second time" if update["exitStatus"] is not None
                    else "was un-exited (exitStatus: null) after its exit")
        else:
            changed = sorted(set(update) - {"sessionUpdate", "terminalId", "capabilities", "_meta"})
            if not changed:
                return
            what = f"changed {', '.join(changed)} after its exit"
        self._m.flag("S1", f"terminal {tid!r} {what}", message)

    def _r75_base64(self, data: Any, message: Any) -> None:
        """R75: terminal bytes are base64-encoded (each chunk on its own)."""
        if not is_base64(data):
            self._m.flag("R75", "terminal data is not valid base64", message)

    def _r105_output_kept(self, term: TerminalModel, output: Any, message: Any) -> None:
        """R105: ``terminal/cancel`` keeps the terminal's retained output."""
        if term.cancelled and (output is None or obj(output).get("data") == ""):
            self._m.flag("R105", "terminal output cleared after terminal/cancel", message)
