"""Extension methods (``_vendor/...``) an agent serves, declared with [`extension`][acp_agent.extension].

::

    class MyAgent(Agent):
        @extension("_acme/index_status")
        async def index_status(self, params: dict[str, Any], client: ClientPeer) -> dict[str, Any]:
            return {"files": 1200}

        @extension("_acme/reindex", notification=True)
        async def reindex(self, params: ReindexParams, client: ClientPeer) -> None: ...

The handler gets the params (validated strictly when its annotation is a pydantic model:
``-32602`` otherwise, never a hook call) and the calling connection's client; its return value
(a model, a dict, or ``None`` for ``{}``) is the answer, and a [`RequestError`][acp_agent.RequestError]
it raises is the error answer. Unknown ``_`` methods are still ``-32601`` (notifications: ignored).
To call the client's own extension methods, use ``session.client.request(...)`` / ``notify(...)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar, get_type_hints

from pydantic import BaseModel

__all__ = ["Extension", "extension", "extensions_of"]

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
_MARK: Final = "__acp_extension__"


@dataclass(frozen=True, slots=True)
class Extension:
    """One extension method of an agent class."""

    method: str
    notification: bool
    attribute: str
    params: type[BaseModel] | None


def extension(method: str, *, notification: bool = False) -> Callable[[F], F]:
    """Serve the decorated agent method as the extension request (or ``notification``) ``method``."""
    if not method.startswith("_"):
        raise ValueError(f"{method!r} is not an extension method name: they start with '_' (e.g. '_acme/x')")

    def mark(func: F) -> F:
        setattr(func, _MARK, (method, notification))
        return func

    return mark


def extensions_of(agent: object) -> list[Extension]:
    """The extension methods declared on ``agent``'s class (and its bases)."""
    found: dict[str, Extension] = {}
    for attribute in dir(type(agent)):
        func = getattr(type(agent), attribute, None)
        mark = getattr(func, _MARK, None)
        if mark is None or func is None:
            continue
        method, notification = mark
        if method in found:
            raise ValueError(f"two handlers for the extension method {method!r}")
        found[method] = Extension(method, notification, attribute, _params_model(func))
    return list(found.values())


def _params_model(func: Callable[..., Any]) -> type[BaseModel] | None:
    names = list(inspect.signature(func).parameters)
    if len(names) < 2:
        raise TypeError(f"{func.__qualname__} must take (self, params, client)")
    hint = get_type_hints(func).get(names[1])
    return hint if isinstance(hint, type) and issubclass(hint, BaseModel) else None
