"""JSON-RPC 2.0 over newline-delimited JSON, on any pair of anyio byte streams.

Incoming calls are classified here, then dispatched through `acp_agent._wire.dispatch`
(the adapter over ``jsonrpcserver``); each request runs in its own task so
nothing blocks a cancel. Outgoing requests, response correlation and
``$/cancel_request`` in both directions are handled here too. Every byte goes out
through the one `Writer`.
"""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import orjson
from anyio.abc import ByteReceiveStream, ByteSendStream, TaskGroup
from pydantic import BaseModel, ValidationError

from .. import schema
from .._util.episodes import Episode
from .._util.telemetry import Recorder, Span
from ..errors import ErrorCode, RequestError, StoreError
from . import dispatch
from .framing import DEFAULT_MAX_MESSAGE_BYTES, LineReader, Oversized, Writer
from .templates import notification_line, request_line, result_line

__all__ = [
    "CANCEL_REQUEST", "CURRENT_REQUEST", "MAX_NESTING", "Connection", "IdKey", "Method", "Reply", "RequestId", "Routes",
    "describe_validation_error", "id_key",
]

logger = logging.getLogger(__name__)

_STORE_OUTAGE = Episode()
"""Requests that failed because the session store could not be reached: logged once per outage."""

RequestId = int | str
"""A JSON-RPC request id as ACP allows it: a string or an integer."""

CURRENT_REQUEST: Final[contextvars.ContextVar[RequestId | None]] = contextvars.ContextVar(
    "acp_current_request", default=None
)
"""The id of the incoming request whose handler the current task runs (for request-scoped questions)."""

CANCEL_REQUEST: Final = "$/cancel_request"

MAX_NESTING: Final = 128
"""Deepest nesting of objects and arrays accepted in one incoming message (the envelope counts).

Deeper values would parse, but could not be serialized again (echoes, history replay), so a
request carrying one is answered ``-32602`` and a notification carrying one is dropped.
"""

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_FLOAT_EXACT: Final = 2**53


@dataclass(frozen=True, slots=True)
class Method:
    """One incoming method: its parameter model (or ``None`` for a raw dict) and handler.

    ``params`` may also name a model of [`acp_agent.schema`][acp_agent.schema] (``"NewSessionRequest"``): it is looked
    up as ``schema.<name>`` when the method is first called, through the package's lazy map (its ``TYPE_CHECKING``
    block, the one lazy boundary), so the model's module loads only then (``tests/unit/test_exports.py`` checks each
    name the runtime routes is one the package exports).

    The handler receives the validated params and returns the result: a pydantic model,
    a plain dict, or ``None`` for ``{}``. Handlers run in their own tasks, so their start
    order is up to the scheduler; work that must happen in arrival order (queueing a
    prompt, applying a cancel) goes in ``prepare``, a plain function called while the
    message is dispatched. Its return value is what ``handler`` then receives (or, with no
    handler, the result, answered at once); returning `Reply` answers at once
    too, skipping the handler. A [`RequestError`][acp_agent.RequestError] it raises is the answer.
    """

    handler: Callable[[Any], Awaitable[Any]] | None
    params: type[BaseModel] | str | None = None
    prepare: Callable[[Any], Any] | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer with something to do right after it is queued.

    A handler (or a ``prepare`` step, whose answer then goes out at once, without a handler
    task) may return a ``Reply``: ``result`` is the answer, and ``sent`` (if given) is called
    once the answer is queued for writing, so anything queued by that call is written after
    the answer.
    """

    result: Any
    sent: Callable[[], None] | None = None


@dataclass(slots=True)
class Routes:
    """What a connection serves, handed to it at construction.

    ``requests`` and ``notifications`` map method names to `Method` entries;
    ``guard`` is called for every incoming call before dispatch (raising
    [`RequestError`][acp_agent.RequestError] rejects a request and silently drops a notification);
    ``on_close`` hooks run, shielded, when the connection begins to shut down.
    """

    requests: dict[str, Method] = field(default_factory=dict)
    notifications: dict[str, Method] = field(default_factory=dict)
    guard: Callable[[str, bool], None] | None = None
    on_close: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


@dataclass(slots=True)
class _Call:
    """Per-message dispatch context handed to the bound method."""

    thunk: Callable[[], Awaitable[Any]] | None = None
    immediate: Reply | None = None


@dataclass(slots=True)
class _Outgoing:
    """A request we sent and are waiting on."""

    done: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: RequestError | None = None


IdKey = tuple[bool, Any]
"""A JSON-RPC id as a dictionary key (see `id_key`)."""


def id_key(value: Any) -> IdKey | None:
    """A JSON-RPC id as a dictionary key that keeps ``1`` and ``"1"`` apart (``5.0`` is ``5``); ``None``: no id."""
    if isinstance(value, str):
        return (True, value)
    if isinstance(value, int) and not isinstance(value, bool):
        return (False, value)
    if isinstance(value, float) and value.is_integer():
        return (False, int(value))
    return None


def _valid_id(value: Any) -> bool:
    # A string or an int64 (R6). An integral float is accepted only where it is exact, so the
    # answer echoes the very value that was sent (R7); larger numbers have lost digits already.
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return True
    if isinstance(value, int):
        return _INT64_MIN <= value <= _INT64_MAX
    return (
        isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) <= _FLOAT_EXACT
    )


def _too_deep(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` nests objects/arrays more than ``limit`` levels (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def describe_validation_error(exc: ValidationError, limit: int = 3) -> str:
    """A short, value-free description of what failed validation."""
    parts: list[str] = []
    for err in exc.errors(include_url=False, include_input=False)[:limit]:
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        parts.append(f"{loc}: {err['msg']}" if loc else str(err["msg"]))
    more = exc.error_count() - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def _no_validation(request: Any) -> Any:
    return request


def _identity(request: Any) -> Any:
    return request


class Connection:
    """One JSON-RPC peer connection.

    Give it the `Routes` it serves, then ``await run()``: it serves until the input
    ends or `close` is called, and answers every request it received exactly once
    before returning.
    """

    def __init__(
        self,
        receive: ByteReceiveStream,
        send: ByteSendStream,
        routes: Routes | None = None,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self._receive = receive
        self.writer = Writer(send)
        """The one writer every outgoing byte goes through."""
        self.max_message_bytes = max_message_bytes
        self.routes = routes if routes is not None else Routes()
        """The methods served and the rules around them."""
        self._bound_requests: dict[str, dispatch.BoundMethod] = {}
        self._bound_notifications: dict[str, dispatch.BoundMethod] = {}
        self._incoming: dict[IdKey, tuple[anyio.CancelScope, Any, _Replies]] = {}
        self._outgoing: dict[int, _Outgoing] = {}
        self._withdrawn: set[int] = set()
        self._stray = Episode()  # responses to no request: one log line per episode
        self._next_id = 0
        self._tg: TaskGroup | None = None
        self._closed = anyio.Event()
        self.telemetry: Recorder | None = None
        """What requests are reported to (`use_telemetry`); ``None``, the default, reports nothing."""

    def use_telemetry(self, telemetry: Recorder | None) -> None:
        """Report this connection's requests and bytes to ``telemetry`` (``None``: nothing)."""
        self.telemetry = telemetry
        self.writer.on_sent = (lambda size: telemetry.wire(sent=size)) if telemetry is not None else None

    @property
    def requests(self) -> dict[str, Method]:
        """The request methods served (`Routes.requests`)."""
        return self.routes.requests

    @property
    def notifications(self) -> dict[str, Method]:
        """The notification methods served (`Routes.notifications`)."""
        return self.routes.notifications

    @property
    def on_close(self) -> list[Callable[[], Awaitable[None]]]:
        """Hooks run, shielded, when the connection begins to shut down (`Routes.on_close`)."""
        return self.routes.on_close

    # -- serving -------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until end of input or `close`, then shut down cleanly."""
        async with anyio.create_task_group() as outer:
            outer.start_soon(self.writer.run)
            try:
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    tg.start_soon(self._read_loop, tg)
                    await self._closed.wait()
                    for hook in self.on_close:
                        with anyio.CancelScope(shield=True):
                            await hook()
                    tg.cancel_scope.cancel()
            finally:
                self._tg = None
                self._fail_outgoing()
                self.writer.close()

    def close(self) -> None:
        """Stop serving: in-flight requests are answered ``-32800`` and output is flushed."""
        self._closed.set()

    @property
    def closed(self) -> bool:
        """True once the connection is shutting down."""
        return self._closed.is_set()

    @property
    def next_request_id(self) -> int:
        """The id the next request this side sends will carry (ids count up from 0)."""
        return self._next_id

    @property
    def answering(self) -> bool:
        """True while a request's handler runs (its answer is not queued yet)."""
        return bool(self._incoming)

    @property
    def task_group(self) -> TaskGroup:
        """The connection's task group (valid while `run` is serving)."""
        if self._tg is None:
            raise RuntimeError("connection is not running")
        return self._tg

    async def _read_loop(self, tg: TaskGroup) -> None:
        try:
            async for line in LineReader(self._receive, self.max_message_bytes):
                if isinstance(line, Oversized):
                    self._send_error(
                        None,
                        RequestError.invalid_request(
                            f"message exceeds the {self.max_message_bytes}-byte limit (max_message_bytes)"
                        ),
                    )
                    continue
                self._handle_line(line, tg)
        finally:
            self.close()

    def _handle_line(self, line: bytes, tg: TaskGroup) -> None:
        if self.telemetry is not None:
            self.telemetry.wire(received=len(line) + 1)
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            self._send_error(None, RequestError.parse_error())
            return
        # Only a line with more brackets than the limit can nest too deeply; skip the walk otherwise.
        deep = line.count(b"{") + line.count(b"[") > MAX_NESTING
        if isinstance(message, list):
            if not message:
                self._send_error(None, RequestError.invalid_request("empty batch"))
                return
            batch = _Batch(self.writer, len(message))
            for entry in message:
                self._handle_message(entry, tg, batch, deep)
        else:
            self._handle_message(message, tg, _Single(self.writer), deep)

    def _handle_message(self, message: Any, tg: TaskGroup, out: _Replies, deep: bool = False) -> None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            out.answer(None, RequestError.invalid_request().to_dict())
            return
        too_deep = deep and _too_deep(message)
        method = message.get("method")
        if method is None:
            if "id" in message and ("result" in message or "error" in message):
                if too_deep:
                    message = {"id": message["id"], "error": RequestError.internal_error(
                        f"response nested deeper than {MAX_NESTING} levels").to_dict()}
                self._handle_response(message)
                out.skip()
            else:
                out.answer(None, RequestError.invalid_request().to_dict())
            return
        is_request = "id" in message
        request_id = message.get("id")
        params = message.get("params", {})
        if not isinstance(method, str) or (is_request and not _valid_id(request_id)):
            out.answer(None, RequestError.invalid_request().to_dict())
            return
        if not is_request:
            if too_deep:
                logger.warning("acp: dropping a %r notification nested deeper than %d levels", method, MAX_NESTING)
            else:
                self._handle_notification(method, params, tg)
            out.skip()
            return
        if not isinstance(params, (dict, list)):
            out.answer(request_id, RequestError.invalid_request("params must be an object").to_dict())
            return
        key = (isinstance(request_id, str), request_id)  # id_key, inlined (the id is valid): every request passes here
        if key in self._incoming:
            out.answer(request_id, RequestError.invalid_request("id already in flight").to_dict())
            return
        guard = self.routes.guard
        if guard is not None:
            try:
                guard(method, True)
            except RequestError as exc:
                out.answer(request_id, exc.to_dict())
                return
        if (too_deep or isinstance(params, list)) and method in self.requests:
            if too_deep:
                error = RequestError.invalid_params(f"nested deeper than {MAX_NESTING} levels")
            else:  # ACP params are always an object; by-position arrays (even empty) fit no method.
                error = RequestError.invalid_params("params must be an object")
            out.answer(request_id, error.to_dict())
            return
        call = _Call()
        telemetry = self.telemetry
        if telemetry is None:
            refused = self._dispatch(message, call, method, params)
            span = None
        else:  # the request's span is the parent of what its dispatch starts (a held prompt's turn)
            span = telemetry.request(method, request_id, params if isinstance(params, dict) else {})
            with telemetry.activate(span):
                refused = self._dispatch(message, call, method, params)
        if call.immediate is not None:
            out.answer(request_id, None, call.immediate.result, call.immediate.sent)
            if span is not None:
                span.end()
            return
        if call.thunk is None:
            # Refused: unknown method, params that do not bind or fail validation, a prepare step's error.
            refusal = refused if refused is not None else RequestError.internal_error().to_dict()
            out.answer(request_id, refusal)
            if span is not None:
                span.end(str(refusal["code"]))
            return
        scope = anyio.CancelScope()
        self._incoming[key] = (scope, request_id, out)
        tg.start_soon(self._run_request, request_id, key, call.thunk, scope, out, span)

    def _dispatch(self, message: dict[str, Any], call: _Call, method: str, params: Any) -> dict[str, Any] | None:
        """Bind and prepare one request (`dispatch`): the error object of a refusal, else ``None``."""
        table = self._bound_requests
        if len(table) != len(self.routes.requests):
            table = self._bound_requests_table()
        bound = table.get(method)
        if bound is not None and isinstance(params, dict):  # the hot path
            return dispatch.call(bound, call, method, params)
        return dispatch.dispatch(message, table, call, method)

    def _handle_notification(self, method: str, params: Any, tg: TaskGroup) -> None:
        if method == CANCEL_REQUEST:
            self._handle_cancel_request(params)
            return
        if not isinstance(params, (dict, list)) or self._check_guard(method, False) is not None:
            return
        call = _Call()
        table = self._bound_notifications_table()
        bound = table.get(method)
        if bound is not None and isinstance(params, dict):
            dispatch.call(bound, call, method, params)
        else:
            dispatch.dispatch({"jsonrpc": "2.0", "method": method, "params": params}, table, call, method)
        if call.thunk is not None:
            tg.start_soon(self._run_notification, method, call.thunk)

    def _check_guard(self, method: str, is_request: bool) -> RequestError | None:
        guard = self.routes.guard
        if guard is None:
            return None
        try:
            guard(method, is_request)
        except RequestError as exc:
            return exc
        return None

    def _bound_requests_table(self) -> dict[str, dispatch.BoundMethod]:
        if len(self._bound_requests) != len(self.requests):
            self._bound_requests = {name: _binder(m) for name, m in self.requests.items()}
        return self._bound_requests

    def _bound_notifications_table(self) -> dict[str, dispatch.BoundMethod]:
        if len(self._bound_notifications) != len(self.notifications):
            self._bound_notifications = {name: _binder(m) for name, m in self.notifications.items()}
        return self._bound_notifications

    async def _run_request(
        self,
        request_id: Any,
        key: IdKey,
        thunk: Callable[[], Awaitable[Any]],
        scope: anyio.CancelScope,
        out: _Replies,
        span: Span | None = None,
    ) -> None:
        answer: dict[str, Any] | None = None
        CURRENT_REQUEST.set(request_id)  # this task's own context: the handler may ask questions scoped to it
        active = self.telemetry.activate(span) if span is not None and self.telemetry is not None else None
        try:
            if active is not None:
                active.__enter__()
            with scope:
                try:
                    result = await thunk()
                except RequestError as exc:
                    answer = {"error": exc.to_dict()}
                except StoreError as exc:  # an outage: one log line per episode, and an answer saying "retry"
                    _STORE_OUTAGE.log(logger, logging.ERROR, "acp: the session store is unavailable (%s); requests "
                                      "are answered \"Session store unavailable, retry\"", exc)
                    answer = {"error": RequestError.store_unavailable().to_dict()}
                except Exception:
                    logger.exception("acp: handler for request %r failed", request_id)
                    answer = {"error": RequestError.internal_error().to_dict()}
                else:
                    answer = {"result": result}
        finally:
            # Not in flight any more: abandon_requests() already answered it.
            if self._incoming.pop(key, None) is not None:
                if answer is None:
                    answer = {"error": RequestError.request_cancelled().to_dict()}
                if "error" in answer:
                    out.answer(request_id, answer["error"])
                elif isinstance(answer["result"], Reply):
                    out.answer(request_id, None, answer["result"].result, answer["result"].sent)
                else:
                    out.answer(request_id, None, answer["result"])
            if span is not None:
                if active is not None:
                    active.__exit__(None, None, None)
                span.end(str(answer["error"]["code"]) if answer is not None and "error" in answer else None)

    async def _run_notification(self, method: str, thunk: Callable[[], Awaitable[Any]]) -> None:
        try:
            await thunk()
        except Exception:
            logger.exception("acp: handler for notification %r failed", method)

    def _handle_cancel_request(self, params: Any) -> None:
        if not isinstance(params, dict):
            return
        request_id = params.get("requestId")
        if not _valid_id(request_id):
            return
        entry = self._incoming.get((isinstance(request_id, str), request_id))  # id_key of a valid id
        if entry is not None:
            entry[0].cancel()

    def abandon_requests(self) -> int:
        """Answer every request still in flight ``-32800`` now (R18), for a shutdown that
        cannot wait for their handlers; their late results are dropped. Returns how many."""
        entries = list(self._incoming.values())
        self._incoming.clear()
        for scope, request_id, out in entries:
            scope.cancel()
            out.answer(request_id, RequestError.request_cancelled().to_dict())
        return len(entries)

    # -- answering -----------------------------------------------------------------

    def _send_error(self, id_: Any, error: RequestError) -> None:
        self.writer.send_nowait(_response_bytes(id_, error.to_dict(), None))

    # -- outgoing ------------------------------------------------------------------

    def notify(self, method: str, params: BaseModel | Mapping[str, Any]) -> None:
        """Queue a notification to the peer (ordered with everything else sent)."""
        self.writer.send_nowait(notification_line(method, _dump(params)))

    def send_raw(self, data: bytes) -> None:
        """Queue one pre-serialized message line (must end with a newline)."""
        self.writer.send_nowait(data)

    async def request(self, method: str, params: BaseModel | Mapping[str, Any]) -> Any:
        """Send a request and wait for its result.

        Raises [`RequestError`][acp_agent.RequestError] when the peer answers with an error, or ``-32800``
        when the connection closes first. If the waiting task is cancelled, the request
        is withdrawn with ``$/cancel_request`` and its late answer is dropped.
        """
        if self.closed:
            raise RequestError.request_cancelled("connection closed")
        span: Span | None = None
        if self.telemetry is not None:  # the trace context goes along in params._meta
            span, params = self.telemetry.send_request(method, params if isinstance(params, dict)
                                                       else orjson.loads(_dump(params)))
        request_id = self._next_id
        self._next_id += 1
        pending = _Outgoing()
        self._outgoing[request_id] = pending
        self.writer.send_nowait(request_line(request_id, method, _dump(params)))
        try:
            await pending.done.wait()
        except BaseException:
            if not pending.done.is_set() and self._outgoing.pop(request_id, None) is not None:
                self._withdrawn.add(request_id)
                self.notify(CANCEL_REQUEST, {"requestId": request_id})
            if span is not None:
                span.end("cancelled")
            raise
        if span is not None:
            span.end(str(pending.error.code) if pending.error is not None else None)
        if pending.error is not None:
            raise pending.error
        return pending.result

    def _handle_response(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        key = request_id if isinstance(request_id, int) and not isinstance(request_id, bool) else None
        pending = self._outgoing.pop(key, None) if key is not None else None
        if pending is None:
            if key is not None and key in self._withdrawn:
                self._withdrawn.discard(key)
            else:
                self._stray.log(logger, logging.WARNING, "acp: dropping a response for unknown request id %r",
                                request_id)
            return
        if "error" in message:
            err = message["error"]
            if isinstance(err, dict) and isinstance(err.get("code"), int):
                pending.error = RequestError(err["code"], str(err.get("message", "")), err.get("data"))
            else:
                pending.error = RequestError.internal_error("malformed error response")
        else:
            pending.result = message.get("result")
        pending.done.set()

    def _fail_outgoing(self) -> None:
        for pending in self._outgoing.values():
            pending.error = RequestError.request_cancelled("connection closed")
            pending.done.set()
        self._outgoing.clear()


class _Replies:
    """Where the answers to one incoming line go."""

    def answer(
        self, id_: Any, error: dict[str, Any] | None, result: Any = None, sent: Callable[[], None] | None = None
    ) -> None:
        """Queue one answer; ``sent`` is called once it is queued for writing."""
        raise NotImplementedError

    def skip(self) -> None:
        """The entry needs no answer (a notification or a response)."""


class _Single(_Replies):
    """Answers to a lone message go straight to the writer."""

    __slots__ = ("_writer",)

    def __init__(self, writer: Writer) -> None:
        self._writer = writer

    def answer(
        self, id_: Any, error: dict[str, Any] | None, result: Any = None, sent: Callable[[], None] | None = None
    ) -> None:
        self._writer.send_nowait(_response_bytes(id_, error, result))
        if sent is not None:
            sent()


class _Batch(_Replies):
    """Collects the answers of one incoming batch and sends them as one array."""

    def __init__(self, writer: Writer, size: int) -> None:
        self._writer = writer
        self._remaining = size
        self._answers: list[bytes] = []
        self._sent: list[Callable[[], None]] = []

    def answer(
        self, id_: Any, error: dict[str, Any] | None, result: Any = None, sent: Callable[[], None] | None = None
    ) -> None:
        self._answers.append(_response_bytes(id_, error, result)[:-1])
        if sent is not None:
            self._sent.append(sent)
        self.skip()

    def skip(self) -> None:
        self._remaining -= 1
        if self._remaining == 0 and self._answers:
            self._writer.send_nowait(b"[" + b",".join(self._answers) + b"]\n")
            for sent in self._sent:
                sent()


def _binder(method: Method) -> dispatch.BoundMethod:
    """``method`` as a bound method of `dispatch`: validates, prepares and leaves its handler in the call."""
    model = method.params

    def bind(call: _Call, /, **params: Any) -> None:
        nonlocal model
        if model is None:
            parsed: Any = params
        else:
            if isinstance(model, str):
                model = getattr(schema, model)
            try:  # the model's own validator: model_validate adds a call layer and nothing else
                parsed = model.__pydantic_validator__.validate_python(params, strict=True)
            except ValidationError as exc:
                raise RequestError(
                    ErrorCode.INVALID_PARAMS, f"Invalid params: {describe_validation_error(exc)}"
                ) from None
        if method.prepare is not None:
            parsed = method.prepare(parsed)
        handler = method.handler
        if isinstance(parsed, Reply):
            call.immediate = parsed
        elif handler is None:
            call.immediate = Reply(parsed)  # no handler: the prepared value is the answer
        else:
            call.thunk = lambda: handler(parsed)

    return bind


def _dump(value: Any) -> bytes:
    if isinstance(value, BaseModel):
        return value.__pydantic_serializer__.to_json(value, by_alias=True, exclude_unset=True)
    if value is None:
        return b"{}"
    return orjson.dumps(value)


def _response_bytes(id_: Any, error: dict[str, Any] | None, result: Any) -> bytes:
    if error is not None:
        return orjson.dumps({"jsonrpc": "2.0", "id": id_, "error": error}, option=orjson.OPT_APPEND_NEWLINE)
    if isinstance(result, BaseModel):
        return result_line(id_, _dump(result))
    # A plain result (a prompt's answer, ``{}``): the whole line in one call.
    return orjson.dumps({"jsonrpc": "2.0", "id": id_, "result": {} if result is None else result},
                        option=orjson.OPT_APPEND_NEWLINE)
