"""The background judge: background lists (R85..R95, R110, R112), subagent children (R79, R80, R90) and, at the
end, what ended items still show (R92, R100)."""

from __future__ import annotations

from typing import Any

from .constants import (
    FINAL,
    ITEM_ID_FIELD,
)
from .judge import BaseJudge
from .model import (
    ItemKey,
    SessionModel,
    custom,
    is_quiet,
    obj,
    state_snapshot,
)
from .rules import (
    quote,
)
from .shared import check_path


class BackgroundJudge(BaseJudge):
    """Judges background lists (R85..R95, R110, R112), subagent children (R79, R80, R90) and what ended items still
    show at the end (R92, R100)."""

    def on_update(self, s: SessionModel, kind: Any, update: dict[str, Any], message: Any) -> None:
        """Track and judge a ``state_update``'s list or a ``subagent_update``."""
        if kind == "state_update":
            self._background(s, update, message, update.get("state"))
        elif kind == "subagent_update":
            self._subagent_update(s, update, message)

    def at_session_end(self, s: SessionModel) -> None:
        """Judge a stale last list (R92), ``cancel`` left on ended items (R100) and a child's mirror (R80)."""
        self._r92_stale_list(s)
        self._r100_cancel_after_end(s)
        self._r80_mirror(s)

    def _background(self, s: SessionModel, update: dict[str, Any], message: Any, state: Any) -> list[ItemKey] | None:
        """Track and judge the ``background`` list of a ``state_update``; its item keys (``None``: not reported)."""
        value = update.get("background")
        if value is None:
            self._r91_keeps_reporting(s, message)
            return None
        if not isinstance(value, list):
            self._m.flag("R87", "background must be an array", message)
            return None
        s.reporting = True
        keys = self._list_items(s, value, message)
        in_resume = s.resume is not None
        for key in keys:
            self._check_listed(s, key, message, in_resume)
        self._r88_once(s, keys, message)
        self._removals(s, keys, message)
        self._new_listings(s, keys, message, state)
        if state == "idle" and not value and s.last_list:
            s.r95 = message
        s.last_list = keys
        s.list_at = self._m.n
        s.ever_listed.update(keys)
        return keys

    def _r91_keeps_reporting(self, s: SessionModel, message: Any) -> None:
        """R91: once a list was reported, every ``state_update`` carries ``background``."""
        if s.reporting:
            self._m.flag("R91", "state_update without background after a list was reported", message)

    def _list_items(self, s: SessionModel, items: list[Any], message: Any) -> list[ItemKey]:
        """R87 / R84: well-formed, unique items; unknown types start with ``_``."""
        keys: list[ItemKey] = []
        for item in items:
            kind = obj(item).get("type")
            if not isinstance(kind, str):
                self._m.flag("R87", f"malformed background item {quote(item)}", message)
                continue
            if kind not in ITEM_ID_FIELD:
                if not custom(kind):
                    self._m.flag("R84", f"unknown background item type {kind!r} without the _ prefix", message)
                continue
            ident = obj(item).get(ITEM_ID_FIELD[kind])
            if not isinstance(ident, str):
                self._m.flag("R87", f"{kind} item without {ITEM_ID_FIELD[kind]}", message)
                continue
            if (kind, ident) in keys:
                self._m.flag("R87", f"{kind} {ident!r} listed twice", message)
                continue
            keys.append((kind, ident))
        return keys

    def _check_listed(self, s: SessionModel, key: ItemKey, message: Any, in_resume: bool) -> None:
        if key in s.fork_items:
            self._r112_fork(key, message)
            return
        kind, ident = key
        if kind == "subagent":
            self._r87_r90_child(s, ident, message, in_resume)
        elif not self._m.has_entity(s, key):
            self._r87_r93_unknown(s, key, message, in_resume)
        elif not self._m.live(s, key):
            self._m.flag("R87", f"{kind} {ident!r} is listed although it ended (final status / exitStatus)", message)

    def _r112_fork(self, key: ItemKey, message: Any) -> None:
        """R112: a fork never lists work copied from its source."""
        self._m.flag("R112", f"fork lists {key} from its source session", message)

    def _r87_r93_unknown(self, s: SessionModel, key: ItemKey, message: Any, in_resume: bool) -> None:
        """R87 / R93: items name entities this session announced before (other sessions': R87)."""
        kind, ident = key
        elsewhere = any(self._m.has_entity(o, key) for o in self._m.sessions.values() if o is not s)
        if elsewhere:
            self._m.flag("R87", f"{kind} {ident!r} belongs to another session", message)
        elif not in_resume:  # judged by R113 at the resume answer
            self._m.flag("R93", f"{kind} {ident!r} is listed before its entity update", message)

    def _r87_r90_child(self, s: SessionModel, ident: str, message: Any, in_resume: bool) -> None:
        """R79 / R87 / R90: listed children are announced children of this session, not quiet."""
        child = self._m.sessions.get(ident)
        if child is None or child.parent is None:
            if not in_resume:
                self._m.flag("R79", f"child {ident!r} is listed before its announcing subagent_update", message)
        elif child.parent != s.id:
            self._m.flag("R87", f"child {ident!r} belongs to session {child.parent!r}", message)
        elif is_quiet(child.child_state):
            self._m.flag("R90", f"child {ident!r} is idle with an empty list but still listed", message)

    def _r88_once(self, s: SessionModel, keys: list[ItemKey], message: Any) -> None:
        """R88: a tool call whose content is only listed terminals is not listed besides them."""
        terminals = {ident for kind, ident in keys if kind == "terminal"}
        for kind, ident in keys:
            tc = s.tool_calls.get(ident) if kind == "tool_call" else None
            if tc is None or not tc.content:
                continue
            if all(obj(c).get("type") == "terminal" for c in tc.content) and tc.terminals() <= terminals:
                self._m.flag("R88", f"tool call {ident!r} is listed besides the terminal(s) it only shows", message)

    def _removals(self, s: SessionModel, keys: list[ItemKey], message: Any) -> None:
        """R89 / R90 / R94: items leave the list only after they were reported ended."""
        if s.last_list is None:
            return
        now = set(keys)
        covered = self._m.covered(s, [k for k in keys if k[0] == "terminal"])
        for key in s.last_list:
            if key in now:
                continue
            kind, ident = key
            if kind == "subagent":
                child = self._m.sessions.get(ident)
                if child is not None and not is_quiet(child.child_state):
                    self._m.flag("R90", f"child {ident!r} dropped before it reported idle with an empty list",
                                 message)
            elif kind == "terminal":
                term = s.terminals.get(ident)
                if term is not None and not term.exited:
                    self._m.flag("R94", f"terminal {ident!r} dropped from the list without exitStatus", message)
            else:
                tc = s.tool_calls.get(ident)
                if tc is None or tc.status in FINAL or key in covered:
                    continue
                rule = "R89" if tc.status in ("pending", "paused") else "R94"
                self._m.flag(rule, f"tool call {ident!r} ({tc.status}) dropped from the list without a final status",
                             message)

    def _new_listings(self, s: SessionModel, keys: list[ItemKey], message: Any, state: Any) -> None:
        """R85 / R110: pending questions (R110: permission requests) whose subject only now gets listed."""
        new = set(keys) - set(s.last_list or [])
        if not new:
            return
        for req in self._m.pending_of(s):
            hit = req.refs & new
            if not hit or hit & req.listed_at_send:
                continue
            if state == "requires_action":
                what = "permission" if req.method == "session/request_permission" else "elicitation"
                self._m.flag("R85", f"{sorted(hit)} listed while the foreground waits on its {what}",
                             req.message, message)
            elif req.method == "session/request_permission":
                self._m.flag("R110", f"permission request for {sorted(hit)} sent before a snapshot listed it",
                             req.message, message)

    def _subagent_update(self, s: SessionModel, update: dict[str, Any], message: Any) -> None:
        """Track and judge a ``subagent_update``: the child it announces or mirrors (R79, R80, R90)."""
        cid = update.get("sessionId")
        if not isinstance(cid, str):
            return
        child = self._m.session(cid)
        if child.parent is None:
            child.parent = s.id
            s.children.add(cid)
            self._m.known.add(cid)
            self._r79_announced_first(cid, message)
        elif child.parent != s.id:
            self._m.flag("R79", f"child {cid!r} of {child.parent!r} announced again by {s.id!r}", message)
        if s.resume is not None:
            s.resume.entity_at.setdefault(("subagent", cid), self._m.n)
        if "state" in update:
            state = update["state"]
            child.mirrored = state_snapshot(state) if isinstance(state, dict) else None
            child.child_state = child.mirrored
            child.child_state_at = self._m.n
        if update.get("cwd") is not None:
            check_path(self._m, update["cwd"], message, "child cwd")
        directories = update.get("additionalDirectories")
        for directory in directories if isinstance(directories, list) else []:
            check_path(self._m, directory, message, "child directory")

    def _r79_announced_first(self, cid: str, message: Any) -> None:
        """R79: the announcing ``subagent_update`` precedes every message naming the child."""
        early = self._m.early.pop(cid, None)
        if early is not None:
            self._m.flag("R79", f"child {cid!r} was named before its announcing subagent_update", early.message,
                         message)

    def _r92_stale_list(self, s: SessionModel) -> None:
        """R92: a list naming finalized items is re-sent."""
        if s.closed or not s.last_list:
            return
        ended = [k for k in s.last_list if self._m.ended(s, k, after=s.list_at)]
        if ended:
            self._m.flag("R92", f"{s.id!r}: {ended} ended but no snapshot re-sent the list")

    def _r80_mirror(self, s: SessionModel) -> None:
        """R80: the parent's ``subagent_update.state`` mirrors the child's own snapshot."""
        if s.parent is None or s.own_state is None or self._m.session(s.parent).closed:
            return
        if s.closed and s.child_state_at > s.closed_at:
            return  # a closed child reports nothing itself: its parent's replay reports how it ended
        if s.mirrored != s.own_state:
            self._m.flag("R80", f"parent's mirror of child {s.id!r} is {s.mirrored!r}, child says {s.own_state!r}")

    def _r100_cancel_after_end(self, s: SessionModel) -> None:
        """R100: ``cancel`` is no longer advertised on ended items."""
        for tid, tc in s.tool_calls.items():
            if tc.cancel and tc.status in FINAL:
                self._m.flag("R100", f"{s.id!r}: final tool call {tid!r} still advertises cancel")
        for tid, term in s.terminals.items():
            if term.cancel and term.exited:
                self._m.flag("R100", f"{s.id!r}: exited terminal {tid!r} still advertises cancel")
