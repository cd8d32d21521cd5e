"""Typed outcome of ``session/request_permission`` and the rules for reading an answer (R20)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from .schema import PermissionOption

__all__ = ["ALLOW_KINDS", "PermissionOutcome", "read_outcome"]

ALLOW_KINDS: Final = frozenset({"allow_once", "allow_always"})
"""Option kinds whose selection means "go ahead"."""


@dataclass(frozen=True, slots=True)
class PermissionOutcome:
    """What the user decided.

    ``option`` is the offered option that was selected, or ``None`` when the request was
    cancelled, dismissed, answered with an error, or answered with anything that was
    not one of the offered options. Only :attr:`allowed` grants permission.
    """

    option: PermissionOption | None

    @property
    def option_id(self) -> str | None:
        """The selected option's id, if a valid option was selected."""
        return self.option.option_id if self.option is not None else None

    @property
    def allowed(self) -> bool:
        """True only when an offered option whose kind means "allow" was selected."""
        return self.option is not None and self.option.kind in ALLOW_KINDS

    @property
    def cancelled(self) -> bool:
        """True when no offered option was selected."""
        return self.option is None


NOT_APPROVED: Final = PermissionOutcome(None)


def read_outcome(result: Any, options: Sequence[PermissionOption]) -> PermissionOutcome:
    """Interpret a ``RequestPermissionResponse`` strictly: anything unexpected is a refusal."""
    if not isinstance(result, dict):
        return NOT_APPROVED
    outcome = result.get("outcome")
    if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
        return NOT_APPROVED
    option_id = outcome.get("optionId")
    for option in options:
        if option.option_id == option_id:
            return PermissionOutcome(option)
    return NOT_APPROVED
