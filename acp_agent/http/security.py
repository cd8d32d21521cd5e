"""Who may talk to the server: the ``Host``, ``Origin`` and bearer-token checks on every request.

The answers say only ``Unauthorized`` (401) or ``Forbidden`` (403), never which check or which
part of a credential failed. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import inspect
import ipaddress
from collections.abc import Mapping, Sequence
from typing import Final

from .options import HttpOptions

__all__ = [
    "FORBIDDEN", "LOOPBACK_HOSTS", "Refusal", "check_request", "host_allowed", "is_loopback", "origin_allowed",
    "served_on_loopback",
]

LOOPBACK_HOSTS: Final = ("localhost", "127.0.0.1", "::1")
"""The ``Host`` names accepted by a server bound to loopback."""

Refusal = tuple[int, str]
"""An HTTP status and its (generic) text."""

UNAUTHORIZED: Final[Refusal] = (401, "Unauthorized")
FORBIDDEN: Final[Refusal] = (403, "Forbidden")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address or name) is loopback only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def origin_allowed(origin: str, allowed: Sequence[str]) -> bool:
    """Whether a browser ``Origin`` is in ``allowed`` (``"*"`` allows any)."""
    origin = origin.strip().lower().rstrip("/")
    return any(entry == "*" or entry.strip().lower().rstrip("/") == origin for entry in allowed)


def host_allowed(headers: Mapping[str, str], allowed_hosts: Sequence[str]) -> bool:
    """Whether the ``Host`` header names one of ``allowed_hosts`` (any port)."""
    host = headers.get("host")
    return host is not None and _host_name(host) in {name.lower() for name in allowed_hosts}


def served_on_loopback(server: Sequence[object] | None) -> bool:
    """Whether an ASGI scope's ``server`` (the address the request came in on) is a loopback address."""
    if not server:
        return False
    host = server[0]
    return isinstance(host, str) and is_loopback(host)


async def check_request(headers: Mapping[str, str], options: HttpOptions) -> Refusal | None:
    """The refusal for a request with these (lower-cased) headers, or ``None`` to let it through."""
    if options.allowed_hosts is not None and not host_allowed(headers, options.allowed_hosts):
        return FORBIDDEN
    origin = headers.get("origin")
    if origin is not None and not origin_allowed(origin, options.allowed_origins):
        return FORBIDDEN
    token = options.token
    if token is None:
        return None
    scheme, _, presented = headers.get("authorization", "").partition(" ")
    presented = presented.strip()
    if scheme.lower() != "bearer" or not presented:
        return UNAUTHORIZED
    if isinstance(token, str):
        ok = hmac.compare_digest(presented.encode("utf-8", "surrogateescape"), token.encode())
    else:
        verdict = token(presented)
        ok = bool(await verdict) if inspect.isawaitable(verdict) else bool(verdict)
    return None if ok else UNAUTHORIZED
