"""Plans: ``plan_update`` (items, and [unstable] markdown / file plans) and [unstable] ``plan_removed``."""

from typing import Annotated, Literal, TypeAlias

from pydantic import Tag

from .base import UNKNOWN_TAG, Meta, PlanId, WireModel, discriminate_on

__all__ = [
    "PlanEntry",
    "PlanEntryPriority",
    "PlanEntryStatus",
    "PlanFile",
    "PlanItems",
    "PlanMarkdown",
    "PlanRemoved",
    "PlanUpdate",
    "PlanUpdateContent",
    "UnknownPlanUpdateContent",
]

PlanEntryPriority: TypeAlias = Literal["high", "medium", "low"] | str
"""How important a plan entry is."""

PlanEntryStatus: TypeAlias = Literal["pending", "in_progress", "completed", "cancelled"] | str
"""Progress of a plan entry."""


class PlanEntry(WireModel):
    """One step of a plan given as a list of items ([`PlanItems`][acp_agent.schema.PlanItems]): ``content`` says what
    the step is, ``priority`` is ``"high"``, ``"medium"`` or ``"low"``, ``status`` is ``"pending"``, ``"in_progress"``,
    ``"completed"`` or ``"cancelled"`` (all three required)."""

    content: str
    priority: PlanEntryPriority
    status: PlanEntryStatus
    meta: Meta = None


class PlanItems(WireModel):
    """A plan as a complete list of entries; each update replaces the plan with this id."""

    type: Literal["items"] = "items"
    plan_id: PlanId
    entries: list[PlanEntry]
    meta: Meta = None


class PlanMarkdown(WireModel):
    """[unstable] A plan as a Markdown document."""

    type: Literal["markdown"] = "markdown"
    plan_id: PlanId
    content: str
    meta: Meta = None


class PlanFile(WireModel):
    """[unstable] A plan kept in a file, referenced by absolute URI."""

    type: Literal["file"] = "file"
    plan_id: PlanId
    uri: str
    meta: Meta = None


class UnknownPlanUpdateContent(WireModel):
    """A plan of an unknown ``type``, kept as received; it still replaces the plan with this id."""

    type: str
    plan_id: PlanId


PlanUpdateContent: TypeAlias = Annotated[
    Annotated[PlanItems, Tag("items")]
    | Annotated[PlanMarkdown, Tag("markdown")]
    | Annotated[PlanFile, Tag("file")]
    | Annotated[UnknownPlanUpdateContent, Tag(UNKNOWN_TAG)],
    discriminate_on("type", ("items", "markdown", "file")),
]
"""The content of a plan, tagged by ``type``."""


class PlanUpdate(WireModel):
    """``plan_update``: create or replace the plan named by ``plan.planId``."""

    session_update: Literal["plan_update"] = "plan_update"
    plan: PlanUpdateContent
    meta: Meta = None


class PlanRemoved(WireModel):
    """[unstable] ``plan_removed``: remove a plan."""

    session_update: Literal["plan_removed"] = "plan_removed"
    plan_id: PlanId
    meta: Meta = None
