"""Who may talk to the server: the ``Host``, ``Origin`` and bearer-token checks on every request,
the principal a credential stands for, and CORS for the browser origins allowed.

The answers say only ``Unauthorized`` (401) or ``Forbidden`` (403), never which check or which
part of a credential failed. Tokens are compared in constant time. A browser cannot set an
``Authorization`` header on a WebSocket, so an upgrade may carry its token as a subprotocol instead:
it offers ``acp`` and ``acp.bearer.<the token, base64url without padding>`` (the server picks
``acp``; a token never goes in a URL, where access logs would keep it).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import inspect
import ipaddress
from collections.abc import Mapping, Sequence
from typing import Final, NamedTuple

from ..records import DEFAULT_PRINCIPAL
from .options import HttpOptions, TokenCheck

__all__ = [
    "FORBIDDEN", "LOOPBACK_HOSTS", "SUBPROTOCOL", "SUBPROTOCOL_TOKEN", "Admitted", "Refusal", "check_request",
    "cors_headers", "host_allowed", "is_loopback", "origin_allowed", "principal_of", "served_on_loopback",
    "subprotocol_offer", "token_table",
]

LOOPBACK_HOSTS: Final = ("localhost", "127.0.0.1", "::1")
"""The ``Host`` names accepted by a server bound to loopback."""

Refusal = tuple[int, str]
"""An HTTP status and its (generic) text."""

SUBPROTOCOL: Final = "acp"
"""The WebSocket subprotocol the server picks when a client offers it (a browser that offers a token must)."""
SUBPROTOCOL_TOKEN: Final = "acp.bearer."
"""The prefix of the subprotocol carrying a browser's token (base64url, no padding)."""


class Admitted(NamedTuple):
    """A request that passed the checks: the principal its credential stands for, and that credential."""

    principal: str
    token: str | None
    subprotocol: str | None = None
    """The WebSocket subprotocol to accept (``acp`` if offered)."""


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


def subprotocol_offer(token: str) -> list[str]:
    """The subprotocols a browser offers to authenticate a WebSocket with ``token``
    (``new WebSocket(url, offer)``)."""
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    return [SUBPROTOCOL, SUBPROTOCOL_TOKEN + encoded]


def _presented(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The token a request presents (``Authorization: Bearer``, else a WebSocket subprotocol) and the
    subprotocol to accept."""
    offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    chosen = SUBPROTOCOL if SUBPROTOCOL in offered else None
    scheme, _, presented = headers.get("authorization", "").partition(" ")
    presented = presented.strip()
    if scheme.lower() == "bearer" and presented:
        return presented, chosen
    for protocol in offered:
        if protocol.startswith(SUBPROTOCOL_TOKEN) and chosen is not None:
            encoded = protocol[len(SUBPROTOCOL_TOKEN):]
            try:
                return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode(), chosen
            except (binascii.Error, ValueError):
                return None, chosen
    return None, chosen


def token_table(tokens: Mapping[str, str]) -> TokenCheck:
    """A token check for several users: ``tokens`` maps each principal to its token; a presented token
    stands for the principal whose token it is (every token is compared, in constant time)."""
    table = [(principal, token.encode()) for principal, token in tokens.items()]

    def check(presented: str) -> str | None:
        offered = presented.encode("utf-8", "surrogateescape")
        found: str | None = None
        for principal, token in table:
            if hmac.compare_digest(offered, token):
                found = principal
        return found

    return check


async def principal_of(token: str | TokenCheck, presented: str) -> str | None:
    """The principal ``presented`` stands for under ``token`` (a plain token: ``"default"``; a callable:
    what it returns, ``True`` meaning ``"default"``), or ``None`` if it is refused."""
    if isinstance(token, str):
        ok = hmac.compare_digest(presented.encode("utf-8", "surrogateescape"), token.encode())
        return DEFAULT_PRINCIPAL if ok else None
    verdict = token(presented)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    if verdict is True:
        return DEFAULT_PRINCIPAL
    return verdict if isinstance(verdict, str) and verdict else None


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


async def check_request(headers: Mapping[str, str], options: HttpOptions,
                        server: Sequence[object] | None = None) -> Refusal | Admitted:
    """The refusal for a request with these (lower-cased) headers, or who it is (`Admitted`).

    ``server`` is the ASGI scope's address the request came in on: on a loopback address with no
    ``allowed_hosts`` given, a ``Host`` other than a loopback name is refused (DNS rebinding), whichever
    ASGI server runs the app.
    """
    if options.allowed_hosts is not None:
        if not host_allowed(headers, options.allowed_hosts):
            return FORBIDDEN
    elif served_on_loopback(server) and not host_allowed(headers, LOOPBACK_HOSTS):
        return FORBIDDEN
    origin = headers.get("origin")
    if origin is not None and not origin_allowed(origin, options.allowed_origins):
        return FORBIDDEN
    presented, subprotocol = _presented(headers)
    token = options.token
    if token is None:
        return Admitted(DEFAULT_PRINCIPAL, None, subprotocol)
    if presented is None:
        return UNAUTHORIZED
    principal = await principal_of(token, presented)
    return UNAUTHORIZED if principal is None else Admitted(principal, presented, subprotocol)


_CORS_HEADERS: Final = "authorization, content-type, accept, acp-connection-id, acp-session-id"


def cors_headers(origin: str, *, preflight: bool = False) -> list[tuple[bytes, bytes]]:
    """The CORS headers of an answer to an allowed browser ``origin`` (with ``preflight``: of an ``OPTIONS``)."""
    headers = [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]
    if preflight:
        headers += [(b"access-control-allow-methods", b"GET, POST, DELETE"),
                    (b"access-control-allow-headers", _CORS_HEADERS.encode()),
                    (b"access-control-max-age", b"600")]
    else:
        headers.append((b"access-control-expose-headers", b"acp-connection-id"))
    return headers
