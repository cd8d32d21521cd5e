"""The one adapter over ``jsonrpcserver``: the only module of the library that imports it.

A *bound method* here is a plain callable ``fn(context, /, **params) -> None`` that raises
[`RequestError`][acp_agent.RequestError] to refuse a call. Two ways in:

- `call`, the hot path: a known method with object params (every ACP request that
  reaches a handler). The connection has parsed and checked the message already and every
  bound method takes any keyword params, so what is left of jsonrpcserver's pipeline is its
  call step: run the method, turn what it raises into a JSON-RPC error. That step is done here
  directly, with jsonrpcserver's mapping (a refusal keeps its code, message and data; any other
  exception is ``-32603`` with its text as data): the full pipeline costs about 40 µs a request
  (``bench/dispatch_overhead.py``), more than the rest of the dispatch.
- `dispatch`, everything else (an unknown method, by-position params): the message goes
  through jsonrpcserver's public ``dispatch_to_serializable``, which looks the method up, binds
  the params to its signature and answers what does not fit.

Both return the error of the call as a JSON-RPC ``error`` object, or ``None`` when the method
ran; the same normalization applies to both, so an answer does not depend on the path taken.

An unknown method is answered here too (jsonrpcserver would answer it the same way). jsonrpcserver is
imported only for what is left, a call with by-position params, on the first one: importing it takes
100-350 ms and 9 MB of RSS (``jsonschema``, its asyncio dispatcher), which no ACP method with object params
needs (``bench/README.md``, "Performance round 11").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ..errors import ErrorCode, RequestError

if TYPE_CHECKING:
    from jsonrpcserver import Result

__all__ = ["BoundMethod", "call", "dispatch"]

logger = logging.getLogger(__name__)

BoundMethod = Callable[..., None]
"""``fn(context, /, **params)``: runs (or schedules) one call; raises [`RequestError`][acp_agent.RequestError] to refuse
it."""

_INTERNAL_ERROR_MESSAGE: Final = "Internal error"  # jsonrpcserver's text for a method that raised
_SIGNATURE_MISFIT: Final = "Invalid params: params do not fit the method"


def call(bound: BoundMethod, context: Any, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """Run ``bound`` with object ``params``: its error object, or ``None`` if it ran."""
    try:
        bound(context, **params)
    except RequestError as exc:
        return _error(method, exc.code, exc.message, exc.data)
    except Exception as exc:
        logger.exception(exc)
        return _error(method, ErrorCode.INTERNAL_ERROR, _INTERNAL_ERROR_MESSAGE, str(exc))
    return None


def dispatch(
    message: Mapping[str, Any], table: Mapping[str, BoundMethod], context: Any, method: str
) -> dict[str, Any] | None:
    """Dispatch a parsed, checked call through jsonrpcserver: its error object, or ``None``.

    ``None`` also for a notification, which jsonrpcserver never answers (a refused one is dropped).
    """
    bound = table.get(method)
    if bound is None:
        return None if "id" not in message else RequestError.method_not_found(method).to_dict()
    from jsonrpcserver import dispatch_to_serializable

    methods = {method: _adapt(bound)}
    response = dispatch_to_serializable(
        message, methods, context=context, deserializer=_identity, validator=_identity
    )
    if not isinstance(response, dict) or "error" not in response:
        return None
    err = response["error"]
    return _error(method, err["code"], err["message"], err.get("data"))


def _adapt(bound: BoundMethod) -> Callable[..., Result]:
    """``bound`` as a jsonrpcserver method: a refusal becomes its ``JsonRpcError``, a run its ``Success``."""
    from jsonrpcserver import JsonRpcError, Success

    def method(context: Any, /, **params: Any) -> Result:
        try:
            bound(context, **params)
        except RequestError as exc:
            raise JsonRpcError(exc.code, exc.message, exc.data) from None
        return Success(None)

    return method


def _error(method: str, code: int, message: str, data: Any) -> dict[str, Any]:
    """The error object answered: ours for an unknown method, a plain text when params do not bind."""
    if code == ErrorCode.METHOD_NOT_FOUND:
        return RequestError.method_not_found(method).to_dict()
    error: dict[str, Any] = {"code": code, "message": message}
    if code == ErrorCode.INVALID_PARAMS and message == "Invalid params" and isinstance(data, str):
        error["message"] = _SIGNATURE_MISFIT  # jsonrpcserver's binding failed; its TypeError text is not for clients
    elif data is not None:
        error["data"] = data
    return error


def _identity(value: Any) -> Any:
    return value
