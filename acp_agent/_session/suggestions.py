"""[unstable, Preview] Prompt suggestions: the follow-up prompts a session offers (``prompt_suggestions_update``).

`suggestion_update` turns what an author passes to ``Session.suggest_prompts`` into the update, or refuses it with
[`InvalidArgumentError`][acp_agent.InvalidArgumentError] before anything is sent (P19): every suggestion is a
non-empty prompt the client could send unchanged, not only blank text, whose blocks are ``text`` or
``resource_link`` or a type the client opted in to under ``capabilities.session.promptSuggestions`` (``image``,
``audio``, ``embeddedContext`` for ``resource`` blocks). A client that did not advertise ``promptSuggestions`` gets
nothing (P17).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pydantic import ValidationError

from ..errors import InvalidArgumentError
from ..schema import (
    ContentBlock,
    InitializeRequest,
    PromptSuggestion,
    PromptSuggestionsCapabilities,
    PromptSuggestionsUpdate,
    TextContent,
)

__all__ = ["client_suggestions", "suggestion_update"]

BASELINE: Final = frozenset({"text", "resource_link"})
"""Block types every client that takes suggestions takes."""

_OPT_IN: Final = {"image": "image", "audio": "audio", "resource": "embedded_context"}
"""Block type -> the ``PromptSuggestionsCapabilities`` field that lets it through."""


def client_suggestions(initialize: InitializeRequest | None) -> PromptSuggestionsCapabilities | None:
    """What the client advertised under ``capabilities.session.promptSuggestions`` (``None``: it takes none)."""
    capabilities = initialize.capabilities if initialize is not None else None
    session = capabilities.session if capabilities is not None else None
    return session.prompt_suggestions if session is not None else None


def suggestion_update(suggestions: Sequence[str | Sequence[ContentBlock]],
                      accepts: PromptSuggestionsCapabilities | None) -> PromptSuggestionsUpdate:
    """The update replacing the session's suggestions with ``suggestions`` (``[]`` withdraws them); raises
    [`InvalidArgumentError`][acp_agent.InvalidArgumentError] for a suggestion the client could not take."""
    if isinstance(suggestions, str):
        raise InvalidArgumentError("suggest_prompts takes a list of suggestions, not one string")
    built = []
    for n, suggestion in enumerate(suggestions):
        blocks: list[ContentBlock] = [TextContent(text=suggestion)] if isinstance(suggestion, str) else list(
            suggestion)
        try:  # wire dicts become blocks, as for ``Session.say``
            offer = PromptSuggestion(prompt=blocks)
        except ValidationError as exc:
            raise InvalidArgumentError(f"suggestion {n} is not a list of content blocks: {exc.errors()[0]['msg']}"
                                       ) from None
        _check(n, offer.prompt, accepts)
        built.append(offer)
    return PromptSuggestionsUpdate(suggestions=built)


def _check(n: int, blocks: list[ContentBlock], accepts: PromptSuggestionsCapabilities | None) -> None:
    if not blocks:
        raise InvalidArgumentError(f"suggestion {n} is empty: a suggested prompt needs at least one block")
    if all(isinstance(b, TextContent) and not b.text.strip() for b in blocks):
        raise InvalidArgumentError(f"suggestion {n} is only blank text")
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind in BASELINE:
            continue
        field = _OPT_IN.get(str(kind))
        if field is None:
            raise InvalidArgumentError(f"suggestion {n}: {kind!r} blocks cannot be suggested")
        if accepts is not None and getattr(accepts, field) is None:
            raise InvalidArgumentError(f"suggestion {n}: the client did not opt in to {kind!r} blocks "
                                       f"(capabilities.session.promptSuggestions)")
