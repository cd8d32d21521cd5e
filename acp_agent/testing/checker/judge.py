"""The judge protocol: what the router calls on each judge of a rule family, and a base that does nothing.

A judge holds the shared model (`model.py`) and judges one family of rules. The router
(`router.py`) calls a hook only on the judges its tables name for that event, in the written order; a judge
overrides the hooks it needs (the base's are no-ops). No judge calls another: what two families share lives in
the model or in `shared.py`.
"""

from __future__ import annotations

from typing import Any, Protocol

from .model import Answer, CheckerModel, Req, SessionModel


class Judge(Protocol):
    """The hooks the router calls; each is routed by one of its tables (named in brackets)."""

    def on_request(self, req: Req) -> None:
        """The agent sent a request (``AGENT_REQUEST``)."""

    def on_withdrawn(self, req: Req, message: Any) -> None:
        """The agent withdrew its pending request ``req`` with the ``$/cancel_request`` ``message`` (``WITHDRAWN``)."""

    def on_answer(self, req: Req, answer: Answer) -> None:
        """The agent answered the client request ``req`` (``ON_ANSWER[req.method]``)."""

    def before_update(self, s: SessionModel, kind: Any, update: dict[str, Any], message: Any) -> None:
        """A ``session/update`` for ``s`` arrived, before it is routed by its kind (``BEFORE_UPDATE``)."""

    def on_update(self, s: SessionModel, kind: Any, update: dict[str, Any], message: Any) -> None:
        """A ``session/update`` of ``kind`` for ``s`` (``ON_UPDATE[kind]``)."""

    def at_session_end(self, s: SessionModel) -> None:
        """The connection ended: judge what is left of session ``s`` (``AT_SESSION_END``)."""

    def at_end(self) -> None:
        """The connection ended: judge what is left (``AT_END``)."""


class BaseJudge:
    """A judge over ``model`` whose hooks do nothing; a rule family overrides the ones it needs."""

    def __init__(self, model: CheckerModel) -> None:
        self._m = model

    def on_request(self, req: Req) -> None:
        """Nothing to judge (see `Judge.on_request`)."""

    def on_withdrawn(self, req: Req, message: Any) -> None:
        """Nothing to judge (see `Judge.on_withdrawn`)."""

    def on_answer(self, req: Req, answer: Answer) -> None:
        """Nothing to judge (see `Judge.on_answer`)."""

    def before_update(self, s: SessionModel, kind: Any, update: dict[str, Any], message: Any) -> None:
        """Nothing to judge (see `Judge.before_update`)."""

    def on_update(self, s: SessionModel, kind: Any, update: dict[str, Any], message: Any) -> None:
        """Nothing to judge (see `Judge.on_update`)."""

    def at_session_end(self, s: SessionModel) -> None:
        """Nothing to judge (see `Judge.at_session_end`)."""

    def at_end(self) -> None:
        """Nothing to judge (see `Judge.at_end`)."""
