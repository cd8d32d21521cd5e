"""Judges of background lists (R85..R95, R110, R112) and subagent children (R79, R80, R90).

`BackgroundRules` is one layer of [`WireChecker`][acp_agent.testing.WireChecker]; it may call the judges of
the layers below it (`ItemRules` and its bases), never those above.
"""

from __future__ import annotations

from typing import Any

from .constants import (
    FINAL,
    ITEM_ID_FIELD,
)
from .items import ItemRules
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


class BackgroundRules(ItemRules):
    """Judges of background lists (R85..R95, R110, R112) and subagent children (R79, R80, R90)."""

    def background(self, s: SessionModel, update: dict[str, Any], message: Any, state: Any) -> list[ItemKey] | None:
        """Track and judge the ``background`` list of a ``state_update``; its item keys (``None``: not reported)."""
        value = update.get("background")
        if value is None:
            self._r91_keeps_reporting(s, message)
            return None
        if not isinstance(value, list):
            self.flag("R87", "background must be an array", message)
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
        s.list_at = self.n
        s.ever_listed.update(keys)
        return keys

    def _r91_keeps_reporting(self, s: SessionModel, message: Any) -> None:
        """R91: once a list was reported, every ``state_update`` carries ``background``."""
        if s.reporting:
            self.flag("R91", "state_update without background after a list was reported", message)

    def _list_items(self, s: SessionModel, items: list[Any], message: Any) -> list[ItemKey]:
        """R87 / R84: well-formed, unique items; unknown types start with ``_``."""
        keys: list[ItemKey] = []
        for item in items:
            kind = obj(item).get("type")
            if not isinstance(kind, str):
                self.flag("R87", f"malformed background item {quote(item)}", message)
                continue
            if kind not in ITEM_ID_FIELD:
                if not custom(kind):
                    self.flag("R84", f"unknown background item type {kind!r} without the _ prefix", message)
                continue
            ident = obj(item).get(ITEM_ID_FIELD[kind])
            if not isinstance(ident, str):
                self.flag("R87", f"{kind} item without {ITEM_ID_FIELD[kind]}", message)
                continue
            if (kind, ident) in keys:
                self.flag("R87", f"{kind} {ident!r} listed twice", message)
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
        elif not self.has_entity(s, key):
            self._r87_r93_unknown(s, key, message, in_resume)
        elif not self.live(s, key):
            self.flag("R87", f"{kind} {ident!r} is listed although it ended (final status / exitStatus)", message)

    def _r112_fork(self, key: ItemKey, message: Any) -> None:
        """R112: a fork never lists work copied from its source."""
        self.flag("R112", f"fork lists {key} from its source session", message)

    def _r87_r93_unknown(self, s: SessionModel, key: ItemKey, message: Any, in_resume: bool) -> None:
        """R87 / R93: items name entities this session announced before (other sessions': R87)."""
        kind, ident = key
        elsewhere = any(self.has_entity(o, key) for o in self.sessions.values() if o is not s)
        if elsewhere:
            self.flag("R87", f"{kind} {ident!r} belongs to another session", message)
        elif not in_resume:  # judged by R113 at the resume answer
            self.flag("R93", f"{kind} {ident!r} is listed before its entity update", message)

    def _r87_r90_child(self, s: SessionModel, ident: str, message: Any, in_resume: bool) -> None:
        """R79 / R87 / R90: listed children are announced children of this session, not quiet."""
        child = self.sessions.get(ident)
        if child is None or child.parent is None:
            if not in_resume:
                self.flag("R79", f"child {ident!r} is listed before its announcing subagent_update", message)
        elif child.parent != s.id:
            self.flag("R87", f"child {ident!r} belongs to session {child.parent!r}", message)
        elif is_quiet(child.child_state):
            self.flag("R90", f"child {ident!r} is idle with an empty list but still listed", message)

    def _r88_once(self, s: SessionModel, keys: list[ItemKey], message: Any) -> None:
        """R88: a tool call whose content is only listed terminals is not listed besides them."""
        terminals = {ident for kind, ident in keys if kind == "terminal"}
        for kind, ident in keys:
            tc = s.tool_calls.get(ident) if kind == "tool_call" else None
            if tc is None or not tc.content:
                continue
            if all(obj(c).get("type") == "terminal" for c in tc.content) and tc.terminals() <= terminals:
                self.flag("R88", f"tool call {ident!r} is listed besides the terminal(s) it only shows", message)

    def _removals(self, s: SessionModel, keys: list[ItemKey], message: Any) -> None:
        """R89 / R90 / R94: items leave the list only after they were reported ended."""
        if s.last_list is None:
            return
        now = set(keys)
        covered = self.covered(s, [k for k in keys if k[0] == "terminal"])
        for key in s.last_list:
            if key in now:
                continue
            kind, ident = key
            if kind == "subagent":
                child = self.sessions.get(ident)
                if child is not None and not is_quiet(child.child_state):
                    self.flag("R90", f"child {ident!r} dropped before it reported idle with an empty list",
                               message)
            elif kind == "terminal":
                term = s.terminals.get(ident)
                if term is not None and not term.exited:
                    self.flag("R94", f"terminal {ident!r} dropped from the list without exitStatus", message)
            else:
                tc = s.tool_calls.get(ident)
                if tc is None or tc.status in FINAL or key in covered:
                    continue
                rule = "R89" if tc.status in ("pending", "paused") else "R94"
                self.flag(rule, f"tool call {ident!r} ({tc.status}) dropped from the list without a final status",
                           message)

    def _new_listings(self, s: SessionModel, keys: list[ItemKey], message: Any, state: Any) -> None:
        """R85 / R110: pending questions (R110: permission requests) whose subject only now gets listed."""
        new = set(keys) - set(s.last_list or [])
        if not new:
            return
        for req in self.pending_of(s):
            hit = req.refs & new
            if not hit or hit & req.listed_at_send:
                continue
            if state == "requires_action":
                what = "permission" if req.method == "session/request_permission" else "elicitation"
                self.flag("R85", f"{sorted(hit)} listed while the foreground waits on its {what}",
                           req.message, message)
            elif req.method == "session/request_permission":
                self.flag("R110", f"permission request for {sorted(hit)} sent before a snapshot listed it",
                           req.message, message)

    def subagent_update(self, s: SessionModel, update: dict[str, Any], message: Any) -> None:
        """Track and judge a ``subagent_update``: the child it announces or mirrors (R79, R80, R90)."""
        cid = update.get("sessionId")
        if not isinstance(cid, str):
            return
        child = self.session(cid)
        if child.parent is None:
            child.parent = s.id
            s.children.add(cid)
            self.known.add(cid)
            self._r79_announced_first(cid, message)
        elif child.parent != s.id:
            self.flag("R79", f"child {cid!r} of {child.parent!r} announced again by {s.id!r}", message)
        if s.resume is not None:
            s.resume.entity_at.setdefault(("subagent", cid), self.n)
        if "state" in update:
            state = update["state"]
            child.mirrored = state_snapshot(state) if isinstance(state, dict) else None
            child.child_state = child.mirrored
            child.child_state_at = self.n
        if update.get("cwd") is not None:
            self.r34_path(update["cwd"], message, "child cwd")
        directories = update.get("additionalDirectories")
        for directory in directories if isinstance(directories, list) else []:
            self.r34_path(directory, message, "child directory")

    def _r79_announced_first(self, cid: str, message: Any) -> None:
        """R79: the announcing ``subagent_update`` precedes every message naming the child."""
        early = self.early.pop(cid, None)
        if early is not None:
            self.flag("R79", f"child {cid!r} was named before its announcing subagent_update", early.message,
                       message)

    def r92_stale_list(self, s: SessionModel) -> None:
        """R92: a list naming finalized items is re-sent."""
        if s.closed or not s.last_list:
            return
        ended = [k for k in s.last_list if self.ended(s, k, after=s.list_at)]
        if ended:
            self.flag("R92", f"{s.id!r}: {ended} ended but no snapshot re-sent the list")

    def r80_mirror(self, s: SessionModel) -> None:
        """R80: the parent's ``subagent_update.state`` mirrors the child's own snapshot."""
        if s.parent is None or s.own_state is None or self.session(s.parent).closed:
            return
        if s.closed and s.child_state_at > s.closed_at:
            return  # a closed child reports nothing itself: its parent's replay reports how it ended
        if s.mirrored != s.own_state:
            self.flag("R80", f"parent's mirror of child {s.id!r} is {s.mirrored!r}, child says {s.own_state!r}")
