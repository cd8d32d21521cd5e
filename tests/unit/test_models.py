"""Tests of the wire models in ``acp_agent.schema``.

* every JSON example of the protocol reference round-trips exactly through its model;
* tri-state fields (omitted / ``null`` / value) stay distinct;
* unknown enum values, union tags and keys are preserved;
* what the models emit validates against the official (unstable) JSON Schema, with an extra
  strict check that rejects keys the schema does not define;
* the models, unions and enums agree with the schema's ``$defs`` (names, tags, values);
* the models accept what the schema accepts and refuse what it refuses: the schema's own
  ``examples`` / ``default`` values, hand-written edge cases, and every single-key change of
  the reference examples and samples.
"""

import json
import re
import types
import typing
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import orjson
import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from pydantic import BaseModel, Discriminator, TypeAdapter, ValidationError

import acp_agent.schema as schema
from acp_agent.schema import (
    AgentMessage,
    AgentMessageChunk,
    AgentThought,
    AgentThoughtChunk,
    Annotations,
    ArchiveSessionRequest,
    ArchiveSessionResponse,
    AudioContent,
    AuthAccount,
    AuthMethodAgent,
    AuthMethodTerminal,
    AuthStatusCapabilities,
    AuthStatusRequest,
    AuthStatusResponse,
    AuthStatusUpdateNotification,
    AvailableCommand,
    AvailableCommandsUpdate,
    BackgroundSubagent,
    BackgroundTerminal,
    BackgroundToolCall,
    BlobResourceContents,
    BooleanPropertySchema,
    CancelRequestNotification,
    CancelSessionNotification,
    CancelTerminalRequest,
    CancelTerminalResponse,
    CancelToolCallRequest,
    CancelToolCallResponse,
    ClientAuthCapabilities,
    ClientCapabilities,
    CloseSessionRequest,
    CloseSessionResponse,
    CommandPermissionSubject,
    CompactionSummaryChunk,
    CompactionUpdate,
    CompleteElicitationNotification,
    ConfigOptionUpdate,
    Content,
    ContentBlock,
    Cost,
    CreateElicitationRequest,
    CreateElicitationResponse,
    DeleteSessionRequest,
    DeleteSessionResponse,
    Diff,
    DiffPatch,
    DiffPathChange,
    DiffPathPairChange,
    DisableProviderRequest,
    DisableProviderResponse,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    ElicitationSchema,
    ElicitationUrlCapabilities,
    EmbeddedResource,
    EmptyIfNull,
    EnumOption,
    EnvVariable,
    Error,
    ForkSessionRequest,
    ForkSessionResponse,
    HttpHeader,
    Icon,
    IdleStateUpdate,
    ImageContent,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    IntegerPropertySchema,
    ListProvidersRequest,
    ListProvidersResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    LoginAuthRequest,
    LoginAuthResponse,
    LogoutAuthRequest,
    LogoutAuthResponse,
    McpAcpCapabilities,
    McpCapabilities,
    McpError,
    McpHttpCapabilities,
    McpServerAcp,
    McpServerHttp,
    McpServerStdio,
    McpStdioCapabilities,
    MessageMcpNotification,
    MessageMcpRequest,
    MessageMcpResponse,
    MultiSelectPropertySchema,
    NewSessionRequest,
    NewSessionResponse,
    Notice,
    NumberPropertySchema,
    OtherStateUpdate,
    PermissionOption,
    PlanEntry,
    PlanFile,
    PlanItems,
    PlanMarkdown,
    PlanRemoved,
    PlanUpdate,
    PromptCapabilities,
    PromptEmbeddedContextCapabilities,
    PromptImageCapabilities,
    PromptRequest,
    PromptResponse,
    ProviderCurrentConfig,
    ProviderInfo,
    ProvidersCapabilities,
    ReplayFromStart,
    RequestPermissionRequest,
    RequestPermissionResponse,
    RequiresActionStateUpdate,
    ResourceLink,
    ResumeSessionRequest,
    ResumeSessionResponse,
    RunningStateUpdate,
    SelectedPermissionOutcome,
    SessionAdditionalDirectoriesCapabilities,
    SessionArchiveCapabilities,
    SessionCancelCapabilities,
    SessionCapabilities,
    SessionConfigOption,
    SessionConfigSelectGroup,
    SessionConfigSelectOption,
    SessionDeleteCapabilities,
    SessionForkCapabilities,
    SessionInfo,
    SessionInfoUpdate,
    SessionMessage,
    SessionMessageChunk,
    SessionNotFoundErrorData,
    SessionStatusCapabilities,
    SessionStatusRequest,
    SessionStatusResponse,
    SessionSystemPromptCapabilities,
    SessionSystemPromptModeCapabilities,
    SessionSystemPromptOverrideCapabilities,
    SessionTitleCapabilities,
    SessionUpdate,
    SetProviderRequest,
    SetProviderResponse,
    SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
    SetSessionTitleRequest,
    SetSessionTitleResponse,
    StateUpdate,
    StringMultiSelectItems,
    StringPropertySchema,
    SubagentSessionCapabilities,
    SubagentUpdate,
    SystemPrompt,
    Terminal,
    TerminalAuthCapabilities,
    TerminalCancelCapabilities,
    TerminalCapabilities,
    TerminalExitStatus,
    TerminalOutput,
    TerminalOutputChunk,
    TerminalSize,
    TerminalUpdate,
    TextCommandInput,
    TextContent,
    TextResourceContents,
    TitledMultiSelectItems,
    ToolCallCancelCapabilities,
    ToolCallCapabilities,
    ToolCallContentChunk,
    ToolCallLocation,
    ToolCallPermissionSubject,
    ToolCallUpdate,
    UnarchiveSessionRequest,
    UnarchiveSessionResponse,
    UnknownBackgroundWork,
    UnknownContentBlock,
    UnknownPlanUpdateContent,
    UnknownSessionUpdate,
    UnknownStateUpdate,
    UnsupportedProtocolVersionErrorData,
    UpdateSessionNotification,
    Usage,
    UsageUpdate,
    UserMessage,
    UserMessageChunk,
    WireModel,
    to_json,
    to_wire,
)
from acp_agent.schema.methods import AGENT_METHODS, CLIENT_METHODS, PROTOCOL_METHODS, MethodSpec

SPEC_DIR = Path(__file__).resolve().parents[3] / "shared" / "spec"
REFERENCE_FILE = SPEC_DIR / "ACP-V2-AGENT-REFERENCE.md"
# The official schema: the shared spec copy, or the byte-identical one in the pinned npm package.
SCHEMA_FILE = next(
    (
        path
        for path in (
            SPEC_DIR / "acp-v2-schema.unstable.json",
            Path(__file__).resolve().parents[1]
            / "interop/node_modules/@agentclientprotocol/sdk/schema/v2/schema.unstable.json",
        )
        if path.exists()
    ),
    SPEC_DIR / "acp-v2-schema.unstable.json",
)

needs_schema = pytest.mark.skipif(
    not SCHEMA_FILE.exists(), reason=f"the unstable ACP JSON Schema is not available at {SCHEMA_FILE}"
)

ALL_SPECS: list[MethodSpec] = [*AGENT_METHODS.values(), *CLIENT_METHODS.values(), *PROTOCOL_METHODS.values()]


@cache
def _adapter(target: Any) -> TypeAdapter[Any]:
    return TypeAdapter(target)


def _parse(target: Any, payload: Any, *, strict: bool = False) -> Any:
    """``payload`` validated by ``target``: a model class or a union alias."""
    if isinstance(target, type) and issubclass(target, BaseModel):
        return target.model_validate(payload, strict=strict)
    return _adapter(target).validate_python(payload, strict=strict)


def roundtrip(model: BaseModel) -> dict[str, Any]:
    """to_wire of ``model``, after checking that to_json agrees and that parsing it back is lossless."""
    wire = to_wire(model)
    assert to_json(model) == orjson.dumps(wire)
    again = type(model).model_validate(wire)
    assert to_wire(again) == wire
    return wire


# =========================================================================== reference examples

_FENCE = re.compile(r"(?:<!--\s*(response|def):\s*(\S+?)\s*-->\s*\n)?```json\n(.*?)\n```", re.S)


def _reference_examples() -> Iterator[Any]:
    if not REFERENCE_FILE.exists():
        yield pytest.param(
            None,
            None,
            None,
            marks=pytest.mark.skip(reason=f"protocol reference not found at {REFERENCE_FILE}"),
        )
        return
    text = REFERENCE_FILE.read_text(encoding="utf-8")
    for match in _FENCE.finditer(text):
        kind, name, body = match.groups()
        line = text.count("\n", 0, match.start(3)) + 1
        message = json.loads(body)
        label = name if kind else message.get("method", "error" if "error" in message else "?")
        yield pytest.param(kind, name, message, id=f"L{line}-{kind or 'message'}-{label}")


def _spec_for(method: str, *, notification: bool) -> MethodSpec:
    found = [
        table[method]
        for table in (AGENT_METHODS, CLIENT_METHODS, PROTOCOL_METHODS)
        if method in table and table[method].is_notification == notification
    ]
    assert len(found) == 1, f"no unique {'notification' if notification else 'request'} model for {method!r}"
    return found[0]


def _example_target(kind: str | None, name: str | None, message: dict[str, Any]) -> tuple[Any, Any]:
    """(model class or union alias, payload) an example maps to."""
    if kind == "def":
        assert name is not None
        return getattr(schema, name), message
    assert message.get("jsonrpc") == "2.0"
    if "method" in message:
        spec = _spec_for(message["method"], notification="id" not in message)
        return spec.params, message["params"]
    if "result" in message:
        assert kind == "response" and name, "a response example needs a <!-- response: method --> comment"
        spec = _spec_for(name, notification=False)
        assert spec.result is not None
        return spec.result, message["result"]
    if "error" in message:
        return Error, message["error"]
    raise AssertionError(f"cannot map example {message!r}")


def test_reference_has_all_examples() -> None:
    if not REFERENCE_FILE.exists():
        pytest.skip(f"protocol reference not found at {REFERENCE_FILE}")
    assert len(_FENCE.findall(REFERENCE_FILE.read_text(encoding="utf-8"))) == 85


@pytest.mark.parametrize(("kind", "name", "message"), list(_reference_examples()))
def test_reference_example_roundtrips(kind: str | None, name: str | None, message: dict[str, Any]) -> None:
    target, payload = _example_target(kind, name, message)
    model = _parse(target, payload)
    _parse(target, payload, strict=True)  # the connection parses params strictly
    assert to_wire(model) == payload
    assert orjson.loads(to_json(model)) == payload
    assert to_json(model) == orjson.dumps(to_wire(model))
    if SCHEMA_FILE.exists():
        def_name = name if kind == "def" and name else type(model).__name__
        assert_valid(payload, def_name)
        assert_no_unknown_keys(payload, def_name)


# =========================================================================== tri-state


def test_tool_call_update_dumps_only_what_was_passed() -> None:
    update = ToolCallUpdate(tool_call_id="c1", status="completed")
    assert to_wire(update) == {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}
    # embedded as a permission subject, the same object carries no sessionUpdate tag
    subject = ToolCallPermissionSubject(tool_call=update)
    assert to_wire(subject)["toolCall"] == {"toolCallId": "c1", "status": "completed"}
    assert to_wire(update)["sessionUpdate"] == "tool_call_update"  # the instance itself is untouched


@pytest.mark.parametrize(
    "wire",
    [
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "title": None},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "title": "Run tests"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": None, "rawInput": None},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "rawOutput": {"exitCode": 1}},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "content": None, "locations": []},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "capabilities": None},
    ],
)
def test_tool_call_update_tri_state_roundtrip(wire: dict[str, Any]) -> None:
    update = ToolCallUpdate.model_validate(wire)
    assert to_wire(update) == wire
    assert to_wire(UpdateSessionNotification(session_id="s", update=update))["update"] == wire


def test_tool_call_update_omitted_null_and_value_are_distinct() -> None:
    omitted = ToolCallUpdate(tool_call_id="c1")
    nulled = ToolCallUpdate(tool_call_id="c1", title=None, raw_input=None)
    valued = ToolCallUpdate(tool_call_id="c1", title="t", raw_input={"a": 1})
    assert "title" not in to_wire(omitted) and "rawInput" not in to_wire(omitted)
    assert to_wire(nulled)["title"] is None and to_wire(nulled)["rawInput"] is None
    assert to_wire(valued)["title"] == "t" and to_wire(valued)["rawInput"] == {"a": 1}
    assert len({orjson.dumps(to_wire(m)) for m in (omitted, nulled, valued)}) == 3


def test_meta_null_versus_omitted() -> None:
    assert "_meta" not in to_wire(ToolCallUpdate(tool_call_id="c1"))
    assert to_wire(ToolCallUpdate(tool_call_id="c1", meta=None))["_meta"] is None
    assert to_wire(ToolCallUpdate(tool_call_id="c1", meta={"k": None}))["_meta"] == {"k": None}
    for wire in (
        {"sessionUpdate": "agent_message", "messageId": "m", "_meta": None},
        {"sessionUpdate": "agent_message", "messageId": "m"},
        {"sessionUpdate": "agent_message", "messageId": "m", "_meta": {"a": {"b": None}}},
    ):
        assert roundtrip(AgentMessage.model_validate(wire)) == wire
    # the attribute can be set by its Python name or its wire alias
    assert to_wire(TextContent.model_validate({"text": "x", "_meta": {"a": 1}}))["_meta"] == {"a": 1}


def test_terminal_exit_status_null_versus_omitted() -> None:
    base = {"sessionUpdate": "terminal_update", "terminalId": "t1"}
    extras: tuple[dict[str, Any], ...] = (
        {},
        {"exitStatus": None},
        {"exitStatus": {}},
        {"exitStatus": {"exitCode": None, "signal": "SIGTERM"}},
    )
    for extra in extras:
        wire = {**base, **extra}
        assert roundtrip(TerminalUpdate.model_validate(wire)) == wire
    assert "exitStatus" not in to_wire(TerminalUpdate(terminal_id="t1"))
    assert to_wire(TerminalUpdate(terminal_id="t1", exit_status=None))["exitStatus"] is None
    assert to_wire(TerminalUpdate(terminal_id="t1", exit_status=TerminalExitStatus()))["exitStatus"] == {}


def test_agent_message_chunk_emits_its_discriminators() -> None:
    chunk = AgentMessageChunk(message_id="m", content=TextContent(text="hi"))
    expected = {
        "sessionUpdate": "agent_message_chunk",
        "messageId": "m",
        "content": {"type": "text", "text": "hi"},
    }
    assert to_wire(chunk) == expected
    assert (
        to_json(chunk)
        == b'{"sessionUpdate":"agent_message_chunk","messageId":"m","content":{"type":"text","text":"hi"}}'
    )
    assert to_wire(UpdateSessionNotification(session_id="s", update=chunk)) == {
        "sessionId": "s",
        "update": expected,
    }


def test_constants_are_emitted_everywhere() -> None:
    assert to_wire(RunningStateUpdate()) == {"sessionUpdate": "state_update", "state": "running"}
    assert to_wire(IdleStateUpdate(stop_reason="end_turn")) == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "end_turn",
    }
    assert to_wire(PlanUpdate(plan=PlanItems(plan_id="p", entries=[]))) == {
        "sessionUpdate": "plan_update",
        "plan": {"type": "items", "planId": "p", "entries": []},
    }
    assert to_wire(ElicitationSchema(properties={"x": BooleanPropertySchema()})) == {
        "type": "object",
        "properties": {"x": {"type": "boolean"}},
    }
    assert to_wire(AvailableCommand(name="web", description="Search")) == {
        "type": "command",
        "name": "web",
        "description": "Search",
    }
    # model_construct and model_copy keep them too
    assert to_wire(TextContent.model_construct(text="x")) == {"type": "text", "text": "x"}
    assert to_wire(TextContent(text="x").model_copy(update={"text": "y"})) == {"type": "text", "text": "y"}


def test_nested_state_snapshot_has_no_session_update() -> None:
    child = SubagentUpdate(session_id="child", state=IdleStateUpdate(background=[]))
    assert to_wire(child)["state"] == {"state": "idle", "background": []}
    parsed = UpdateSessionNotification.model_validate(
        {"sessionId": "s", "update": {"sessionUpdate": "state_update", "state": "running"}}
    )
    assert isinstance(parsed.update, RunningStateUpdate)
    mirrored = SubagentUpdate(session_id="child", state=parsed.update)
    assert to_wire(mirrored)["state"] == {"state": "running"}
    assert to_wire(SessionStatusResponse(status="open", state=parsed.update))["state"] == {"state": "running"}
    assert to_wire(SubagentUpdate(session_id="child", state=None))["state"] is None


def test_defaults_do_not_leak_onto_the_wire() -> None:
    request = InitializeRequest(protocol_version=2, info=Implementation(name="c", version="1"))
    assert to_wire(request) == {"protocolVersion": 2, "info": {"name": "c", "version": "1"}}
    assert request.capabilities == ClientCapabilities()
    new = NewSessionRequest(cwd="/p")
    assert new.mcp_servers == [] and new.additional_directories == []
    assert to_wire(new) == {"cwd": "/p"}
    assert to_wire(NewSessionResponse(session_id="s")) == {"sessionId": "s"}


def test_null_lists_read_as_empty() -> None:
    params = NewSessionRequest.model_validate(
        {"cwd": "/p", "mcpServers": None, "additionalDirectories": None}
    )
    assert params.mcp_servers == [] and params.additional_directories == []
    server = McpServerStdio.model_validate({"type": "stdio", "name": "n", "command": "/bin/x", "args": None})
    assert server.args == []


def test_python_names_and_wire_names_are_both_accepted() -> None:
    by_wire = ToolCallUpdate.model_validate({"toolCallId": "c", "rawInput": 1})
    by_name = ToolCallUpdate.model_validate({"tool_call_id": "c", "raw_input": 1})
    assert (
        to_wire(by_wire)
        == to_wire(by_name)
        == {"sessionUpdate": "tool_call_update", "toolCallId": "c", "rawInput": 1}
    )
    snake = UpdateSessionNotification.model_validate(
        {"session_id": "s", "update": {"session_update": "notice", "severity": "info", "title": "t"}}
    )
    assert isinstance(snake.update, Notice)


def test_errors_and_error_data_roundtrip() -> None:
    error = Error(
        code=-32002,
        message="Resource not found",
        data=SessionNotFoundErrorData(session_id="s"),
    )
    assert to_wire(error) == {"code": -32002, "message": "Resource not found", "data": {"sessionId": "s"}}
    assert to_json(error) == orjson.dumps(to_wire(error))
    data = UnsupportedProtocolVersionErrorData(requested=1, supported=[2])
    assert roundtrip(data) == {"requested": 1, "supported": [2]}


def test_request_ids_keep_their_json_type() -> None:
    assert to_wire(CancelRequestNotification(request_id=1)) == {"requestId": 1}
    assert to_wire(CancelRequestNotification(request_id="1")) == {"requestId": "1"}
    with pytest.raises(ValidationError):
        CancelRequestNotification.model_validate({"requestId": None})
    with pytest.raises(ValidationError):
        CancelRequestNotification.model_validate({"requestId": 1.5})


# =========================================================================== extensibility


def test_unknown_session_update_roundtrips() -> None:
    wire = {
        "sessionId": "s",
        "update": {"sessionUpdate": "_x", "payload": {"deep": [1, None]}, "_meta": None},
    }
    notification = UpdateSessionNotification.model_validate(wire)
    assert isinstance(notification.update, UnknownSessionUpdate)
    assert notification.update.session_update == "_x"
    assert roundtrip(notification) == wire


def test_future_state_roundtrips() -> None:
    wire = {
        "sessionId": "s",
        "update": {"sessionUpdate": "state_update", "state": "_draining", "background": []},
    }
    notification = UpdateSessionNotification.model_validate(wire)
    assert isinstance(notification.update, OtherStateUpdate)
    assert roundtrip(notification) == wire
    unknown = {"sessionId": "s", "update": {"sessionUpdate": "state_update", "state": "unknown"}}
    assert isinstance(UpdateSessionNotification.model_validate(unknown).update, UnknownStateUpdate)


def test_unknown_content_block_roundtrips() -> None:
    wire = {
        "sessionUpdate": "agent_message_chunk",
        "messageId": "m",
        "content": {"type": "_video", "uri": "https://example.com/v.mp4", "frames": 3},
    }
    chunk = AgentMessageChunk.model_validate(wire)
    assert isinstance(chunk.content, UnknownContentBlock)
    assert roundtrip(chunk) == wire
    prompt = PromptRequest.model_validate(
        {"sessionId": "s", "prompt": [wire["content"], {"type": "text", "text": "x"}]}
    )
    assert [type(block) for block in prompt.prompt] == [UnknownContentBlock, TextContent]


def test_unknown_tool_call_status_roundtrips() -> None:
    wire = {"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "_scheduled", "kind": "_deploy"}
    update = ToolCallUpdate.model_validate(wire)
    assert update.status == "_scheduled"
    assert roundtrip(update) == wire
    assert to_wire(ToolCallUpdate(tool_call_id="c", status="paused"))["status"] == "paused"


def test_unknown_background_item_roundtrips() -> None:
    wire = {
        "sessionUpdate": "state_update",
        "state": "idle",
        "background": [{"type": "_queue", "queueId": "q1"}, {"type": "terminal", "terminalId": "t"}],
    }
    notification = UpdateSessionNotification.model_validate({"sessionId": "s", "update": wire})
    assert isinstance(notification.update, IdleStateUpdate)
    background = notification.update.background
    assert background is not None
    assert isinstance(background[0], UnknownBackgroundWork) and isinstance(background[1], BackgroundTerminal)
    assert to_wire(notification)["update"] == wire


def test_unknown_variants_of_other_unions_roundtrip() -> None:
    cases: list[tuple[type[BaseModel], dict[str, Any]]] = [
        (PlanUpdate, {"sessionUpdate": "plan_update", "plan": {"type": "_kanban", "planId": "p", "cols": 3}}),
        (
            ToolCallContentChunk,
            {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c", "content": {"type": "_x"}},
        ),
        (RequestPermissionResponse, {"outcome": {"outcome": "_deferred", "until": 5}}),
        (
            NewSessionRequest,
            {"cwd": "/p", "mcpServers": [{"type": "sse", "name": "old", "url": "https://x"}]},
        ),
        (
            ResumeSessionRequest,
            {"sessionId": "s", "cwd": "/p", "replayFrom": {"type": "_checkpoint", "id": "c"}},
        ),
        (
            InitializeResponse,
            {
                "protocolVersion": 2,
                "info": {"name": "a", "version": "1"},
                "authMethods": [{"type": "_oauth", "methodId": "m", "name": "OAuth"}],
            },
        ),
        (
            RequestPermissionRequest,
            {
                "sessionId": "s",
                "title": "t",
                "subject": {"type": "_file", "path": "/x"},
                "options": [{"optionId": "o", "name": "OK", "kind": "_allow_forever"}],
            },
        ),
        (
            AvailableCommandsUpdate,
            {
                "sessionUpdate": "available_commands_update",
                "availableCommands": [
                    {"type": "_macro", "name": "m", "description": "d", "steps": 2},
                    {"type": "command", "name": "c", "description": "d", "input": {"type": "_file"}},
                ],
            },
        ),
        (
            ConfigOptionUpdate,
            {
                "sessionUpdate": "config_option_update",
                "configOptions": [
                    {
                        "type": "_slider",
                        "configId": "t",
                        "name": "Temperature",
                        "currentValue": 0.5,
                        "category": "_sampling",
                    }
                ],
            },
        ),
        (
            ToolCallContentChunk,
            {
                "sessionUpdate": "tool_call_content_chunk",
                "toolCallId": "c",
                "content": {
                    "type": "diff",
                    "changes": [{"operation": "_chmod", "path": "/x", "mode": "755"}],
                },
            },
        ),
        (CreateElicitationResponse, {"action": "_later"}),
        (SessionStatusResponse, {"status": "_hibernating"}),
    ]
    for model, wire in cases:
        assert roundtrip(model.model_validate(wire)) == wire, model.__name__


def test_extra_keys_are_kept_everywhere() -> None:
    wire = {
        "sessionId": "s",
        "update": {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "content": [
                {"type": "content", "content": {"type": "text", "text": "x", "_future": 1}, "_z": [1]}
            ],
            "locations": [{"path": "/a", "_col": 4}],
            "capabilities": {"cancel": {"_how": "sigterm"}, "_pause": {}},
            "_vendorKey": "v",
        },
        "_top": True,
    }
    assert roundtrip(UpdateSessionNotification.model_validate(wire)) == wire


@pytest.mark.parametrize(
    ("model", "wire"),
    [
        (UpdateSessionNotification, {"sessionId": "s", "update": {"messageId": "m"}}),
        (UpdateSessionNotification, {"sessionId": "s", "update": {"sessionUpdate": 3}}),
        (UpdateSessionNotification, {"sessionId": "s", "update": {"sessionUpdate": "state_update"}}),
        (AgentMessageChunk, {"messageId": "m", "content": {"text": "no type"}}),
        (IdleStateUpdate, {"background": [{"terminalId": "t"}]}),
        (RequestPermissionResponse, {"outcome": {"optionId": "o"}}),
        (PlanUpdate, {"plan": {"planId": "p", "entries": []}}),
        (NewSessionRequest, {"cwd": "/p", "mcpServers": [{"name": "n", "command": "/x"}]}),
    ],
)
def test_missing_discriminator_is_rejected(model: type[BaseModel], wire: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(wire)


def test_known_tag_with_bad_shape_is_rejected_not_downgraded() -> None:
    with pytest.raises(ValidationError):
        AgentMessageChunk.model_validate({"messageId": "m", "content": {"type": "text"}})
    with pytest.raises(ValidationError):
        IdleStateUpdate.model_validate({"background": [{"type": "terminal"}]})


# =========================================================================== JSON Schema conformance


@cache
def _schema() -> dict[str, Any]:
    """The official schema with the Preview shapes merged in, as the SDK's validator reads it."""
    from acp_agent.testing.schema import merge_preview

    loaded: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    for path in sorted((Path(schema.__file__).parents[1] / "testing" / "schemas" / "preview").glob("*.json")):
        merge_preview(loaded, json.loads(path.read_text(encoding="utf-8")))
    return loaded


@cache
def _validator(def_name: str) -> Draft202012Validator:
    root = _schema()
    return Draft202012Validator({"$defs": root["$defs"], "$ref": f"#/$defs/{def_name}"})


def assert_valid(instance: Any, def_name: str) -> None:
    errors = sorted(_validator(def_name).iter_errors(instance), key=lambda e: list(e.absolute_path))
    assert not errors, f"{def_name}: " + "; ".join(
        f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]
    )


class StrictKeyChecker:
    """Walks an instance alongside the schema and reports object keys the schema does not define.

    The ACP schemas never set ``additionalProperties: false``, so plain validation accepts
    misspelled keys. Union branches (``anyOf`` / ``oneOf``) contribute their keys only when the
    instance validates against them; objects with ``additionalProperties`` (``_meta``, the
    ``other`` fallbacks) or without any declared properties are free-form.
    """

    def __init__(self, root: dict[str, Any]) -> None:
        self.defs: dict[str, Any] = root["$defs"]
        self._branch_validators: dict[int, Draft202012Validator] = {}
        self.unknown: list[str] = []

    def _valid(self, branch: dict[str, Any], instance: Any) -> bool:
        validator = self._branch_validators.get(id(branch))
        if validator is None:
            validator = Draft202012Validator({**branch, "$defs": self.defs})
            self._branch_validators[id(branch)] = validator
        return bool(validator.is_valid(instance))

    def _collect(self, node: Any, instance: Any, acc: dict[str, Any]) -> None:
        if not isinstance(node, dict):
            acc["open"] = True
            return
        if "$ref" in node:
            self._collect(self.defs[node["$ref"].removeprefix("#/$defs/")], instance, acc)
        for sub in node.get("allOf", []):
            self._collect(sub, instance, acc)
        for keyword in ("anyOf", "oneOf"):
            for sub in node.get(keyword, []):
                if self._valid(sub, instance):
                    self._collect(sub, instance, acc)
        if "properties" in node:
            acc["declared"] = True
            for key, sub in node["properties"].items():
                acc["props"].setdefault(key, []).append(sub)
        extra = node.get("additionalProperties")
        if extra is True or node.get("unevaluatedProperties") is True:
            acc["open"] = True
        elif isinstance(extra, dict):
            acc["wildcard"].append(extra)
        if "items" in node:
            acc["items"].append(node["items"])

    def check(self, node: Any, instance: Any, path: str = "$") -> None:
        if not isinstance(instance, dict | list):
            return
        acc: dict[str, Any] = {"props": {}, "wildcard": [], "items": [], "open": False, "declared": False}
        self._collect(node, instance, acc)
        if isinstance(instance, list):
            for index, item in enumerate(instance):
                for sub in acc["items"]:
                    self.check(sub, item, f"{path}[{index}]")
            return
        for key, value in instance.items():
            subs = acc["props"].get(key) or acc["wildcard"]
            if subs:
                for sub in subs:
                    self.check(sub, value, f"{path}.{key}")
            elif acc["declared"] and not acc["open"]:
                self.unknown.append(f"{path}.{key}")


def assert_no_unknown_keys(instance: Any, def_name: str) -> None:
    checker = StrictKeyChecker(_schema())
    checker.check({"$ref": f"#/$defs/{def_name}"}, instance)
    assert not checker.unknown, f"keys not defined by the schema for {def_name}: {checker.unknown}"


@needs_schema
def test_strict_key_checker_catches_misspellings() -> None:
    bad = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c",
        "stauts": "pending",
        "content": [{"type": "terminal", "terminalId": "t", "terminalID": "t"}],
    }
    assert_valid(bad, "SessionUpdate")  # plain validation does not notice
    checker = StrictKeyChecker(_schema())
    checker.check({"$ref": "#/$defs/SessionUpdate"}, bad)
    assert checker.unknown == ["$.stauts", "$.content[0].terminalID"]
    nested = {"toolCall": {"sessionUpdate": "tool_call_update", "toolCallId": "c"}}
    checker = StrictKeyChecker(_schema())
    checker.check({"$ref": "#/$defs/ToolCallPermissionSubject"}, nested)
    assert checker.unknown == ["$.toolCall.sessionUpdate"]
    free = {"sessionUpdate": "_custom", "anything": {"goes": 1}, "_meta": {"x": {"y": 1}}}
    assert_no_unknown_keys(free, "SessionUpdate")


# --------------------------------------------------------------------------- representative instances

_TEXT = TextContent(
    text="Hello",
    annotations=Annotations(
        audience=["user"], last_modified="2026-10-29T14:22:15Z", priority=0.5, meta={"a": 1}
    ),
    meta={"k": "v"},
)
_BLOCKS: list[ContentBlock] = [
    _TEXT,
    ImageContent(data="aGk=", mime_type="image/png", uri="https://example.com/i.png"),
    AudioContent(data="aGk=", mime_type="audio/wav"),
    ResourceLink(
        name="auth.py",
        uri="file:///p/auth.py",
        title="Auth",
        description="module",
        icons=[Icon(src="https://example.com/i.svg", mime_type="image/svg+xml", sizes=["any"], theme="dark")],
        mime_type="text/x-python",
        size=120,
    ),
    EmbeddedResource(
        resource=TextResourceContents(text="x = 1", uri="file:///p/x.py", mime_type="text/x-python")
    ),
    EmbeddedResource(resource=BlobResourceContents(blob="AAE=", uri="file:///p/b.bin")),
]
_BACKGROUND = [
    BackgroundTerminal(terminal_id="term_1"),
    BackgroundToolCall(tool_call_id="call_1", meta={"why": "watch"}),
    BackgroundSubagent(session_id="child_1"),
]
_OPTIONS = [
    SessionConfigOption(
        type="select",
        config_id="model",
        name="Model",
        description="LLM",
        category="model",
        current_value="fast",
        options=[
            SessionConfigSelectOption(value="fast", name="Fast"),
            SessionConfigSelectOption(value="smart", name="Smart", description="slower"),
        ],
    ),
    SessionConfigOption(
        type="select",
        config_id="mode",
        name="Mode",
        category="mode",
        current_value="ask",
        options=[
            SessionConfigSelectGroup(
                group_id="g", name="Group", options=[SessionConfigSelectOption(value="ask", name="Ask")]
            )
        ],
    ),
    SessionConfigOption(type="boolean", config_id="verbose", name="Verbose", current_value=False),
]
_COMMANDS = [
    AvailableCommand(name="web", description="Search the web", input=TextCommandInput(hint="query")),
    AvailableCommand(name="test", description="Run tests", input=None),
]
_TOOL_CALL = ToolCallUpdate(
    tool_call_id="call_1",
    name="edit_file",
    title="Edit conftest.py",
    kind="edit",
    status="in_progress",
    content=[
        Content(content=_TEXT),
        Diff(
            changes=[
                DiffPathChange(
                    operation="modify", path="/p/a.py", file_type="text", mime_type="text/x-python"
                ),
                DiffPathChange(operation="add", path="/p/b.py"),
                DiffPathPairChange(operation="move", old_path="/p/c.py", path="/p/d.py"),
            ],
            patch=DiffPatch(format="git_patch", text="diff --git /p/a.py /p/a.py\n"),
        ),
        Terminal(terminal_id="term_1"),
    ],
    locations=[ToolCallLocation(path="/p/a.py", line=3), ToolCallLocation(path="/p/b.py")],
    raw_input={"path": "/p/a.py"},
    raw_output=None,
    capabilities=ToolCallCapabilities(cancel=ToolCallCancelCapabilities(meta={"graceful": True})),
    meta={"trace": "x"},
)
_CAPABILITIES = schema.AgentCapabilities(
    session=SessionCapabilities(
        prompt=PromptCapabilities(
            image=PromptImageCapabilities(), audio=None, embedded_context=PromptEmbeddedContextCapabilities()
        ),
        mcp=McpCapabilities(
            stdio=McpStdioCapabilities(), http=McpHttpCapabilities(), acp=McpAcpCapabilities()
        ),
        delete=SessionDeleteCapabilities(),
        additional_directories=SessionAdditionalDirectoriesCapabilities(),
        system_prompt=SessionSystemPromptCapabilities(
            mode=SessionSystemPromptModeCapabilities(override=SessionSystemPromptOverrideCapabilities())
        ),
        fork=SessionForkCapabilities(),
        archive=SessionArchiveCapabilities(),
        status=SessionStatusCapabilities(),
        title=SessionTitleCapabilities(),
    ),
    auth=schema.AgentAuthCapabilities(status=AuthStatusCapabilities()),
    providers=ProvidersCapabilities(),
    meta={"example.com/feature": {}},
)
_MCP_SERVERS = [
    McpServerStdio(
        name="tools", command="/usr/bin/tools", args=["--stdio"], env=[EnvVariable(name="A", value="1")]
    ),
    McpServerHttp(
        name="api", url="https://mcp.example.com", headers=[HttpHeader(name="Authorization", value="x")]
    ),
    McpServerAcp(name="client-tools", server_id="srv_1"),
]
_SYSTEM_PROMPT = SystemPrompt(mode="append", content=[TextContent(text="Be brief.")])
_FORM = ElicitationSchema(
    title="Migration",
    description="Pick a target",
    properties={
        "db": StringPropertySchema(title="Database", enum=["staging", "production"], default="staging"),
        "email": StringPropertySchema(format="email", min_length=3, max_length=100, pattern=".+@.+"),
        "region": StringPropertySchema(one_of=[EnumOption(const="eu", title="Europe", description="EU")]),
        "ratio": NumberPropertySchema(minimum=0, maximum=1, default=0.5),
        "count": IntegerPropertySchema(minimum=1, maximum=9, default=2),
        "dry_run": BooleanPropertySchema(default=True),
        "tags": MultiSelectPropertySchema(
            items=StringMultiSelectItems(enum=["a", "b"]), min_items=1, max_items=2, default=["a"]
        ),
        "envs": MultiSelectPropertySchema(
            items=TitledMultiSelectItems(any_of=[EnumOption(const="dev", title="Dev")])
        ),
    },
    required=["db"],
)


def session_update_samples() -> list[BaseModel]:
    """At least one fully populated instance of every ``SessionUpdate`` variant class."""
    return [
        UserMessageChunk(message_id="msg_u1", content=_TEXT, meta={"c": 1}),
        UserMessage(message_id="msg_u1", content=_BLOCKS, meta={"m": 1}),
        AgentMessageChunk(message_id="msg_a1", content=_BLOCKS[3]),
        AgentMessage(message_id="msg_a1", content=None),
        AgentThoughtChunk(message_id="msg_t1", content=_TEXT),
        AgentThought(message_id="msg_t1", content=[_TEXT]),
        RunningStateUpdate(background=_BACKGROUND, meta={"m": 1}),
        RequiresActionStateUpdate(background=[]),
        IdleStateUpdate(
            stop_reason="error",
            error=Error(code=-32603, message="HTTP 500", data={"status": 500}),
            usage=Usage(
                total_tokens=30,
                input_tokens=20,
                output_tokens=10,
                thought_tokens=5,
                cached_read_tokens=0,
                cached_write_tokens=None,
            ),
            background=_BACKGROUND,
        ),
        IdleStateUpdate(stop_reason=None, background=None),
        IdleStateUpdate(stop_reason="_paused_by_policy"),
        UnknownStateUpdate(background=[]),
        OtherStateUpdate(state="_draining"),
        ToolCallContentChunk(tool_call_id="call_1", content=Terminal(terminal_id="term_1")),
        _TOOL_CALL,
        ToolCallUpdate(
            tool_call_id="call_2",
            status=None,
            kind=None,
            content=None,
            locations=None,
            capabilities=None,
            meta=None,
        ),
        TerminalUpdate(
            terminal_id="term_1",
            command="npm run dev",
            cwd="/p",
            output=TerminalOutput(data="aGk="),
            exit_status=TerminalExitStatus(exit_code=None, signal="SIGTERM"),
            size=TerminalSize(cols=120, rows=40),
            capabilities=TerminalCapabilities(cancel=TerminalCancelCapabilities()),
        ),
        TerminalUpdate(terminal_id="term_2", exit_status=None, capabilities=None),
        TerminalOutputChunk(terminal_id="term_1", data="aGk="),
        PlanUpdate(
            plan=PlanItems(
                plan_id="plan_1",
                entries=[
                    PlanEntry(content="Reproduce", priority="high", status="completed"),
                    PlanEntry(content="Fix", priority="low", status="in_progress", meta={"x": 1}),
                ],
            )
        ),
        PlanUpdate(plan=PlanMarkdown(plan_id="plan_2", content="# Plan\n- step")),
        PlanUpdate(plan=PlanFile(plan_id="plan_3", uri="file:///p/PLAN.md")),
        PlanRemoved(plan_id="plan_2"),
        AvailableCommandsUpdate(available_commands=_COMMANDS),
        ConfigOptionUpdate(config_options=_OPTIONS),
        SessionInfoUpdate(title="Fix flaky test", updated_at="2026-10-29T14:25:00Z"),
        SessionInfoUpdate(title=None),
        UsageUpdate(used=1000, size=200000, cost=Cost(amount=0.12, currency="USD")),
        Notice(severity="warning", title="MCP server unavailable", description=None),
        CompactionUpdate(compaction_id="cmp_1", status="completed", summary=[_TEXT], error=None),
        CompactionSummaryChunk(compaction_id="cmp_1", content=_TEXT),
        SubagentUpdate(
            session_id="child_1",
            title="Explore",
            description="Looks at auth",
            capabilities=SubagentSessionCapabilities(cancel=SessionCancelCapabilities()),
            state=RunningStateUpdate(background=[]),
            cwd="/p",
            additional_directories=["/q"],
        ),
        SubagentUpdate(session_id="child_2", state=IdleStateUpdate(stop_reason="end_turn", background=[])),
        SessionMessage(
            message_id="sm_1",
            sender_session_id="parent",
            recipient_session_id="child_1",
            sender_message_id="sm_0",
            recipient_message_id=None,
            content=[_TEXT],
        ),
        SessionMessageChunk(message_id="sm_1", content=_TEXT),
        schema.ReplayComplete(meta={"r": 1}),
        schema.PromptSuggestionsUpdate(suggestions=[schema.PromptSuggestion(prompt=[_TEXT], meta={"s": 1})]),
        UnknownSessionUpdate(session_update="_progress", percent=40),
    ]


def method_samples() -> list[BaseModel]:
    """At least one populated instance of every params / result class in the method tables."""
    return [
        InitializeRequest(
            protocol_version=2,
            info=Implementation(name="editor", title="Editor", version="1.0"),
            capabilities=ClientCapabilities(
                auth=ClientAuthCapabilities(terminal=TerminalAuthCapabilities()),
                elicitation=ElicitationCapabilities(
                    form=ElicitationFormCapabilities(), url=ElicitationUrlCapabilities()
                ),
            ),
        ),
        InitializeResponse(
            protocol_version=2,
            info=Implementation(name="agent", version="0.1"),
            capabilities=_CAPABILITIES,
            auth_methods=[
                AuthMethodAgent(method_id="login", name="Log in", description="Browser login"),
                AuthMethodTerminal(
                    method_id="tui", name="Terminal", args=["--login"], env=[EnvVariable(name="A", value="b")]
                ),
            ],
        ),
        LoginAuthRequest(method_id="login"),
        LoginAuthResponse(),
        LogoutAuthRequest(),
        LogoutAuthResponse(meta={"k": 1}),
        AuthStatusRequest(),
        AuthStatusResponse(
            state="authenticated",
            accounts=[
                AuthAccount(label="me", active=True, name="Me", email="me@example.com", organization="Org")
            ],
        ),
        AuthStatusUpdateNotification(state="unauthenticated", accounts=[]),
        NewSessionRequest(
            cwd="/p", additional_directories=["/q"], mcp_servers=_MCP_SERVERS, system_prompt=_SYSTEM_PROMPT
        ),
        NewSessionResponse(session_id="s1", config_options=_OPTIONS, available_commands=_COMMANDS),
        ResumeSessionRequest(
            session_id="s1",
            cwd="/p",
            mcp_servers=[],
            replay_from=ReplayFromStart(),
            system_prompt=SystemPrompt(mode="override", content=[_TEXT]),
        ),
        ResumeSessionRequest(session_id="s1", cwd="/p", replay_from=None),
        ResumeSessionResponse(config_options=[], available_commands=_COMMANDS),
        CloseSessionRequest(session_id="s1"),
        CloseSessionResponse(),
        ForkSessionRequest(
            session_id="s1",
            cwd="/p",
            additional_directories=[],
            mcp_servers=_MCP_SERVERS[:1],
            system_prompt=None,
        ),
        ForkSessionResponse(session_id="s2", config_options=_OPTIONS, available_commands=[]),
        ListSessionsRequest(cwd="/p", cursor="", archived="include"),
        ListSessionsResponse(
            sessions=[
                SessionInfo(
                    session_id="s1",
                    cwd="/p",
                    additional_directories=["/q"],
                    title="T",
                    updated_at="2026-10-29T14:22:15Z",
                    archived=False,
                )
            ],
            next_cursor=None,
        ),
        DeleteSessionRequest(session_id="s1"),
        DeleteSessionResponse(),
        ArchiveSessionRequest(session_id="s1"),
        ArchiveSessionResponse(),
        UnarchiveSessionRequest(session_id="s1"),
        UnarchiveSessionResponse(),
        SessionStatusRequest(session_id="s1"),
        SessionStatusResponse(status="open", state=IdleStateUpdate(stop_reason="end_turn", background=[])),
        SessionStatusResponse(status="saved", state=None),
        SetSessionTitleRequest(session_id="s1", title="New title"),
        SetSessionTitleResponse(title="New title"),
        SetSessionConfigOptionRequest(session_id="s1", config_id="model", type="id", value="smart"),
        SetSessionConfigOptionRequest(session_id="s1", config_id="verbose", type="boolean", value=True),
        SetSessionConfigOptionResponse(config_options=_OPTIONS),
        PromptRequest(session_id="s1", prompt=_BLOCKS),
        PromptResponse(message_id="msg_u1"),
        CancelSessionNotification(session_id="s1"),
        CancelRequestNotification(request_id="perm-1"),
        CancelToolCallRequest(session_id="s1", tool_call_id="call_1"),
        CancelToolCallResponse(),
        CancelTerminalRequest(session_id="s1", terminal_id="term_1"),
        CancelTerminalResponse(),
        UpdateSessionNotification(session_id="s1", update=_TOOL_CALL, meta={"seq": 1}),
        RequestPermissionRequest(
            session_id="s1",
            title="Allow edit?",
            description="Changes tests",
            subject=ToolCallPermissionSubject(
                tool_call=ToolCallUpdate(tool_call_id="call_1", title="Edit", kind="edit")
            ),
            options=[
                PermissionOption(option_id="allow", name="Allow once", kind="allow_once"),
                PermissionOption(option_id="always", name="Always", kind="allow_always"),
                PermissionOption(option_id="no", name="Reject", kind="reject_once"),
                PermissionOption(option_id="never", name="Never", kind="reject_always"),
            ],
        ),
        RequestPermissionRequest(
            session_id="s1",
            title="Run pytest?",
            subject=CommandPermissionSubject(
                command="pytest", cwd="/p", tool_call_id="call_1", terminal_id=None
            ),
            options=[PermissionOption(option_id="ok", name="OK", kind="allow_once")],
        ),
        RequestPermissionResponse(outcome=SelectedPermissionOutcome(option_id="allow")),
        RequestPermissionResponse(outcome=schema.CancelledPermissionOutcome()),
        CreateElicitationRequest(
            session_id="s1", tool_call_id="call_1", mode="form", message="Which DB?", requested_schema=_FORM
        ),
        CreateElicitationRequest(
            request_id=7,
            mode="url",
            message="Sign in",
            elicitation_id="gh-1",
            url="https://example.com/oauth",
        ),
        CreateElicitationResponse(
            action="accept",
            content={"db": "staging", "count": 2, "ratio": 0.5, "dry_run": True, "tags": ["a"]},
        ),
        CreateElicitationResponse(action="decline"),
        CompleteElicitationNotification(elicitation_id="gh-1"),
        ListProvidersRequest(),
        ListProvidersResponse(
            providers=[
                ProviderInfo(
                    provider_id="main",
                    supported=["anthropic", "openai"],
                    required=True,
                    current=ProviderCurrentConfig(api_type="anthropic", base_url="https://api.example.com"),
                ),
                ProviderInfo(provider_id="aux", supported=["bedrock"], required=False, current=None),
            ]
        ),
        SetProviderRequest(
            provider_id="main", api_type="openai", base_url="https://llm.example.com", headers={"X-Key": "k"}
        ),
        SetProviderResponse(),
        DisableProviderRequest(provider_id="aux"),
        DisableProviderResponse(),
        MessageMcpRequest(server_id="srv_1", request_id="r1", method="tools/list", params={}),
        MessageMcpResponse(result={"tools": []}),
        MessageMcpResponse(error=McpError(code=-32601, message="nope", data=None)),
        MessageMcpNotification(
            server_id="srv_1", request_id="r1", method="notifications/progress", params=None
        ),
    ]


def _session_update_classes() -> set[type]:
    classes: set[type] = set()

    def walk(tp: Any) -> None:
        if get_origin(tp) is typing.Annotated:
            walk(get_args(tp)[0])
        elif get_origin(tp) in (typing.Union, types.UnionType):
            for arg in get_args(tp):
                walk(arg)
        else:
            classes.add(tp)

    walk(SessionUpdate)
    return classes


def test_samples_cover_every_session_update_variant() -> None:
    covered = {type(sample) for sample in session_update_samples()}
    assert _session_update_classes() - covered == set()


def test_samples_cover_every_method_model() -> None:
    covered = {type(sample) for sample in method_samples()}
    needed = {spec.params for spec in ALL_SPECS} | {
        spec.result for spec in ALL_SPECS if spec.result is not None
    }
    assert needed - covered == set()


_STRUCT_DEF = {
    "UserMessageChunk": "ContentChunk",
    "AgentMessageChunk": "ContentChunk",
    "AgentThoughtChunk": "ContentChunk",
}


@needs_schema
@pytest.mark.parametrize("sample", session_update_samples(), ids=lambda s: type(s).__name__)
def test_session_update_variant_matches_schema(sample: BaseModel) -> None:
    wire = roundtrip(sample)
    assert_valid(wire, "SessionUpdate")
    assert_no_unknown_keys(wire, "SessionUpdate")
    notification = UpdateSessionNotification(session_id="sess_1", update=sample)
    notification_wire = roundtrip(notification)
    assert notification_wire["update"] == wire
    assert_valid(notification_wire, "UpdateSessionNotification")
    assert_no_unknown_keys(notification_wire, "UpdateSessionNotification")
    struct = _STRUCT_DEF.get(type(sample).__name__, type(sample).__name__)
    if struct in _schema()["$defs"]:
        assert_valid(wire, struct)


@needs_schema
@pytest.mark.parametrize("sample", method_samples(), ids=lambda s: type(s).__name__)
def test_method_model_matches_schema(sample: BaseModel) -> None:
    name = type(sample).__name__
    assert name in _schema()["$defs"], f"{name} is not a $defs name"
    wire = roundtrip(sample)
    assert_valid(wire, name)
    assert_no_unknown_keys(wire, name)


@needs_schema
def test_examples_of_errors_data_match_schema() -> None:
    for model, name in (
        (SessionNotFoundErrorData(session_id="s"), "SessionNotFoundErrorData"),
        (
            UnsupportedProtocolVersionErrorData(requested=1, supported=[2]),
            "UnsupportedProtocolVersionErrorData",
        ),
        (Error(code=-32002, message="Resource not found", data={"sessionId": "s"}), "Error"),
    ):
        assert_valid(to_wire(model), name)
        assert_no_unknown_keys(to_wire(model), name)


# =========================================================================== agreement with the schema


@needs_schema
def test_method_tables_match_schema() -> None:
    expected: set[tuple[str, str, str]] = set()
    for def_name, definition in _schema()["$defs"].items():
        side = definition.get("x-side")
        if side is None or side == "proxy":
            continue
        expected.add((definition["x-method"], side, def_name))
    actual: set[tuple[str, str, str]] = set()
    for spec in ALL_SPECS:
        actual.add((spec.method, spec.handled_by, spec.params.__name__))
        if spec.result is not None:
            actual.add((spec.method, spec.handled_by, spec.result.__name__))
    # mcp/message: the schema marks the request "client" and the notification "agent" like ours
    assert actual == expected


def _union_classes(tp: Any) -> list[tuple[Any, str]]:
    """(member type, pydantic tag) of a tagged-union alias."""
    union = get_args(tp)[0] if get_origin(tp) is typing.Annotated else tp
    members = []
    for arg in get_args(union):
        inner, *meta = get_args(arg)
        tag = next(m.tag for m in meta if hasattr(m, "tag"))
        members.append((inner, tag))
    return members


def _member_classes(member: Any) -> list[type[BaseModel]]:
    """The model classes behind one union member (a nested union contributes all of its own)."""
    if get_origin(member) in (typing.Union, types.UnionType):
        return [cls for cls, _ in _union_classes(member)]
    return [member]


def _literal_values(cls: type[BaseModel], attr: str) -> set[str]:
    annotation = cls.model_fields[attr].annotation
    options = [annotation, *get_args(annotation)] if get_origin(annotation) is not Literal else [annotation]
    return {value for option in options if get_origin(option) is Literal for value in get_args(option)}


_UNIONS = [
    "AuthMethod",
    "AvailableCommandInput",
    "BackgroundWork",
    "ContentBlock",
    "DiffChange",
    "ElicitationPropertySchema",
    "McpServer",
    "PlanUpdateContent",
    "ReplayFrom",
    "RequestPermissionOutcome",
    "RequestPermissionSubject",
    "SessionUpdate",
    "StateUpdate",
    "ToolCallContent",
]


@needs_schema
@pytest.mark.parametrize("name", _UNIONS)
def test_union_tags_match_schema(name: str) -> None:
    definition = _schema()["$defs"][name]
    branches = definition["anyOf"]
    key = next(b for b in branches if b.get("title") == "other")["required"][0]
    schema_tags = {
        b["properties"][key]["const"] for b in branches if "const" in b.get("properties", {}).get(key, {})
    }
    alias = getattr(schema, name)
    discriminator = next(m for m in get_args(alias) if isinstance(m, Discriminator))
    tag_of = discriminator.discriminator
    assert callable(tag_of)
    members = {tag: member for member, tag in _union_classes(alias)}
    attr = "session_update" if key == "sessionUpdate" else key
    python_tags: set[str] = set()
    for wire_tag in schema_tags:
        member = members[str(tag_of({key: wire_tag}))]
        classes = _member_classes(member)
        assert any(wire_tag in _literal_values(cls, attr) for cls in classes), (name, wire_tag)
    for member, _ in _union_classes(alias):
        for cls in _member_classes(member):
            python_tags |= _literal_values(cls, attr)
    assert python_tags == schema_tags
    fallback = members[str(tag_of({key: "_custom"}))]
    assert fallback.__name__.startswith(("Unknown", "Other"))


@needs_schema
def test_string_enums_match_schema() -> None:
    checked = 0
    for def_name, definition in _schema()["$defs"].items():
        branches = definition.get("anyOf", [])
        if not branches or not all(b.get("type") == "string" for b in branches):
            continue
        consts = {b["const"] for b in branches if "const" in b}
        alias = getattr(schema, def_name)
        literal, plain = get_args(alias)
        assert plain is str, def_name
        assert set(get_args(literal)) == consts, def_name
        TypeAdapter(alias).validate_python("_custom_value")
        checked += 1
    assert checked >= 18


# Schema definitions deliberately not exported as classes, and why.
_FOLDED_DEFS = {
    # JSON-RPC envelopes and extension/proxy plumbing: not modelled
    "AgentNotification",
    "AgentRequest",
    "AgentResponse",
    "ClientNotification",
    "ClientRequest",
    "ClientResponse",
    "ProxyNotification",
    "ProxyRequest",
    "ProxyResponse",
    "ProxySuccessorNotification",
    "ProxySuccessorRequest",
    "ProxySuccessorResponse",
    "InitializeProxyRequest",
    "InitializeProxyResponse",
    "ExtNotification",
    "ExtRequest",
    "ExtResponse",
    # one Python class per sessionUpdate value instead
    "ContentChunk",
    # union variants folded into one flat class
    "Command",
    "SessionConfigSelect",
    "SessionConfigBoolean",
    "ErrorStopReason",
    "ElicitationFormMode",
    "ElicitationUrlMode",
    "ElicitationSessionScope",
    "ElicitationRequestScope",
    "ElicitationAcceptAction",
    # plain aliases typed as str / int / Any
    "ErrorData",
    "ErrorCode",  # an int; the named codes are acp_agent.errors.ErrorCode
    "ElicitationSchemaType",
    "AuthMethodId",
    "McpRequestId",
    "McpServerAcpId",
    "PermissionOptionId",
    "ProviderId",
    "SessionConfigGroupId",
    "SessionConfigId",
    "SessionConfigValueId",
    "SessionListCursor",
}


@needs_schema
def test_every_schema_definition_is_modelled() -> None:
    missing = sorted(
        name for name in _schema()["$defs"] if name not in _FOLDED_DEFS and not hasattr(schema, name)
    )
    assert missing == []


@needs_schema
def test_every_exported_model_is_named_after_the_schema() -> None:
    defs = _schema()["$defs"]
    sdk_only = {"WireModel", "UserMessageChunk", "AgentMessageChunk", "AgentThoughtChunk", "OtherStateUpdate"}
    for name in schema.__all__:
        obj = getattr(schema, name)
        if isinstance(obj, type) and issubclass(obj, BaseModel):
            assert name in defs or name in sdk_only or name.startswith("Unknown"), name


def test_every_public_class_has_a_docstring() -> None:
    for name in schema.__all__:
        obj = getattr(schema, name)
        if isinstance(obj, type):
            assert (obj.__dict__.get("__doc__") or "").strip(), name


def test_public_models_are_wire_models() -> None:
    for name in schema.__all__:
        obj = getattr(schema, name)
        if isinstance(obj, type) and issubclass(obj, BaseModel):
            assert issubclass(obj, WireModel), name


def test_unstable_shapes_roundtrip() -> None:
    wires: list[tuple[type[BaseModel], dict[str, Any]]] = [
        (
            IdleStateUpdate,
            {
                "sessionUpdate": "state_update",
                "state": "idle",
                "stopReason": "end_turn",
                "usage": {"totalTokens": 3, "inputTokens": 2, "outputTokens": 1},
            },
        ),
        (
            PlanUpdate,
            {"sessionUpdate": "plan_update", "plan": {"type": "markdown", "planId": "p", "content": "# x"}},
        ),
        (
            PlanUpdate,
            {"sessionUpdate": "plan_update", "plan": {"type": "file", "planId": "p", "uri": "file:///x"}},
        ),
        (PlanRemoved, {"sessionUpdate": "plan_removed", "planId": "p"}),
        (
            SessionMessageChunk,
            {
                "sessionUpdate": "session_message_chunk",
                "messageId": "m",
                "content": {"type": "text", "text": "hi"},
            },
        ),
        (
            ForkSessionRequest,
            {"sessionId": "s", "cwd": "/p", "systemPrompt": {"mode": "append", "content": []}},
        ),
    ]
    for model, wire in wires:
        assert roundtrip(model.model_validate(wire)) == wire
    plan = PlanUpdate.model_validate(wires[1][1]).plan
    assert isinstance(plan, PlanMarkdown)
    assert isinstance(
        PlanUpdate.model_validate({"plan": {"type": "_x", "planId": "p"}}).plan, UnknownPlanUpdateContent
    )
    assert isinstance(
        RequestPermissionRequest.model_validate(
            {
                "sessionId": "s",
                "title": "t",
                "options": [{"optionId": "o", "name": "n", "kind": "allow_once"}],
                "subject": {"type": "tool_call", "toolCall": {"toolCallId": "c"}},
            }
        ).subject,
        ToolCallPermissionSubject,
    )


def test_state_update_union_accepts_instances_and_dicts() -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(StateUpdate)
    assert isinstance(adapter.validate_python({"state": "requires_action"}), RequiresActionStateUpdate)
    running = RunningStateUpdate()
    assert adapter.validate_python(running) is running
    notification = UpdateSessionNotification(session_id="s", update=running)
    assert notification.update is running


# =========================================================================== the schema decides
#
# What the schema accepts the models accept, and what it refuses they refuse, both checked
# with Draft 2020-12 validation against the `$defs` entry:
#
# * every value the schema itself carries (`examples` / `default` keywords);
# * hand-written edge cases around the constraints the models cannot express as field types
#   (mode, scope and outcome combinations);
# * every single-key change (drop, null, wrong scalar type, empty list) of the reference
#   examples and the samples above, with a short table of deliberate leniencies.


def _carried_examples() -> list[Any]:
    """``(where, target $defs name or None, value, schema node)`` of every ``examples`` / ``default`` value."""
    found: list[Any] = []

    def target_of(node: dict[str, Any]) -> str | None:
        refs = [node.get("$ref"), *(sub.get("$ref") for sub in node.get("allOf", []))]
        names = [ref.removeprefix("#/$defs/") for ref in refs if ref]
        return names[0] if len(names) == 1 else None

    def walk(node: Any, where: str, owner: str | None) -> None:
        if isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, f"{where}/{index}", None)
            return
        if not isinstance(node, dict):
            return
        values = [*node.get("examples", []), *([node["default"]] if "default" in node else [])]
        for index, value in enumerate(values):
            found.append(pytest.param(where, owner or target_of(node), value, node, id=f"{where}#{index}"))
        for key, sub in node.items():
            if key == "properties":
                for prop, prop_node in sub.items():
                    walk(prop_node, f"{where}/properties/{prop}", None)
            elif key not in ("examples", "default", "const", "enum"):
                walk(sub, f"{where}/{key}", None)

    if SCHEMA_FILE.exists():
        for def_name, definition in _schema()["$defs"].items():
            walk(definition, def_name, def_name)
    return found


@needs_schema
def test_schema_carries_examples() -> None:
    # today: the `default: {}` of the two `capabilities` properties of initialize
    assert len(_carried_examples()) >= 2


@needs_schema
@pytest.mark.parametrize(("where", "target", "value", "node"), _carried_examples())
def test_schema_carried_example_builds_its_model(where: str, target: str | None, value: Any, node: Any) -> None:
    defs = _schema()["$defs"]
    assert Draft202012Validator({**node, "$defs": defs}).is_valid(value), where
    model_type = getattr(schema, target, None) if target else None
    if model_type is None:
        return  # an inline schema, or a $defs entry folded into another model: nothing more to build
    model = _parse(model_type, value)
    _parse(model_type, value, strict=True)
    assert_valid(to_wire(model), str(target))
    assert to_wire(model) == value


# --------------------------------------------------------------------------- hand-written edge cases

_FORM_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}
_SELECT = {"configId": "m", "name": "Model", "type": "select"}
_SELECT_VALUES = [{"value": "fast", "name": "Fast"}]

def _cases(
    model: type[BaseModel], prefix: str, cases: list[tuple[str, dict[str, Any]]], base: dict[str, Any] | None = None
) -> list[Any]:
    """``pytest.param(model, payload)`` for each ``(why, payload)``, the payload laid over ``base``."""
    return [pytest.param(model, {**(base or {}), **payload}, id=f"{prefix}-{why}") for why, payload in cases]


# Payloads the schema refuses (against the `$defs` entry named like the model), by why.
_SCHEMA_REFUSES: list[Any] = [
    *_cases(CreateElicitationRequest, "elicitation", [
        ("url-without-url", {"sessionId": "s", "mode": "url", "message": "m", "elicitationId": "e"}),
        ("url-without-id", {"sessionId": "s", "mode": "url", "message": "m", "url": "https://x.example"}),
        ("url-null-url", {"sessionId": "s", "mode": "url", "message": "m", "elicitationId": "e", "url": None}),
        ("url-null-id", {"requestId": 1, "mode": "url", "message": "m", "elicitationId": None, "url": "https://x"}),
        ("form-without-schema", {"sessionId": "s", "mode": "form", "message": "m"}),
        ("form-null-schema", {"sessionId": "s", "mode": "form", "message": "m", "requestedSchema": None}),
        ("both-scopes", {"sessionId": "s", "requestId": 1, "mode": "form", "message": "m",
                         "requestedSchema": _FORM_SCHEMA}),
        ("no-scope", {"mode": "form", "message": "m", "requestedSchema": _FORM_SCHEMA}),
        ("tool-call-only", {"toolCallId": "c", "mode": "form", "message": "m", "requestedSchema": _FORM_SCHEMA}),
        ("null-session-only", {"sessionId": None, "mode": "form", "message": "m", "requestedSchema": _FORM_SCHEMA}),
        ("null-both", {"sessionId": None, "requestId": None, "mode": "url", "message": "m", "elicitationId": "e",
                       "url": "https://x"}),
        ("other-mode-no-scope", {"mode": "_x", "message": "m"}),
        ("other-mode-both-scopes", {"mode": "_x", "message": "m", "sessionId": "s", "requestId": "r"}),
        ("no-message", {"sessionId": "s", "mode": "form", "requestedSchema": _FORM_SCHEMA}),
        ("no-mode", {"sessionId": "s", "message": "m", "requestedSchema": _FORM_SCHEMA}),
        ("empty-enum", {"sessionId": "s", "mode": "form", "message": "m", "requestedSchema": {
            "type": "object", "properties": {"db": {"type": "string", "enum": []}}}}),
        ("empty-one-of", {"sessionId": "s", "mode": "form", "message": "m", "requestedSchema": {
            "type": "object", "properties": {"db": {"type": "string", "oneOf": []}}}}),
    ]),
    *_cases(MessageMcpResponse, "mcp", [
        ("empty", {}),
        ("meta-only", {"_meta": {"k": 1}}),
        ("null-error", {"error": None}),
        ("error-without-code", {"error": {"message": "m"}}),
    ]),
    *_cases(SessionConfigOption, "config", [
        ("select-without-current", {**_SELECT, "options": _SELECT_VALUES}),
        ("select-null-current", {**_SELECT, "currentValue": None, "options": _SELECT_VALUES}),
        ("select-bool-current", {**_SELECT, "currentValue": True, "options": _SELECT_VALUES}),
        ("select-int-current", {**_SELECT, "currentValue": 3, "options": _SELECT_VALUES}),
        ("select-without-options", {**_SELECT, "currentValue": "fast"}),
        ("select-null-options", {**_SELECT, "currentValue": "fast", "options": None}),
        ("select-empty-options", {**_SELECT, "currentValue": "fast", "options": []}),
        ("boolean-without-current", {"configId": "v", "name": "V", "type": "boolean"}),
        ("boolean-null-current", {"configId": "v", "name": "V", "type": "boolean", "currentValue": None}),
        ("boolean-string-current", {"configId": "v", "name": "V", "type": "boolean", "currentValue": "true"}),
        ("no-type", {"configId": "v", "name": "V", "currentValue": True}),
    ]),
    *_cases(SetSessionConfigOptionRequest, "set-config", [
        ("id-bool", {"type": "id", "value": True}),
        ("id-null", {"type": "id", "value": None}),
        ("boolean-string", {"type": "boolean", "value": "yes"}),
        ("boolean-int", {"type": "boolean", "value": 1}),
        ("other-without-value", {"type": "_slider"}),
    ], base={"sessionId": "s", "configId": "c"}),
]

# Payloads the schema accepts although they look odd: each must validate and round-trip.
_SCHEMA_ACCEPTS: list[Any] = [
    *_cases(CreateElicitationRequest, "elicitation", [
        ("session-scope-null-tool-call", {"sessionId": "s", "toolCallId": None, "mode": "form", "message": "m",
                                          "requestedSchema": _FORM_SCHEMA}),
        # the schema's oneOf sees a non-string scope key as no scope, and toolCallId as an unknown key
        ("request-scope-null-session", {"sessionId": None, "requestId": 1, "mode": "form", "message": "m",
                                        "requestedSchema": _FORM_SCHEMA}),
        ("request-scope-tool-call", {"requestId": "r", "toolCallId": "c", "mode": "url", "message": "m",
                                     "elicitationId": "e", "url": "https://x.example"}),
        ("session-scope-null-request", {"sessionId": "s", "requestId": None, "mode": "url", "message": "m",
                                        "elicitationId": "e", "url": "https://x.example"}),
        ("other-mode-session", {"sessionId": "s", "mode": "_x", "message": "m"}),
        ("other-mode-request", {"requestId": 0, "mode": "future", "message": "m", "extra": {"k": 1}}),
        ("form-with-url-keys", {"sessionId": "s", "mode": "form", "message": "m", "requestedSchema": _FORM_SCHEMA,
                                "url": None}),
    ]),
    *_cases(MessageMcpResponse, "mcp", [
        ("null-result", {"result": None}),
        ("result-null-error", {"result": [1], "error": None}),
        ("both", {"result": {"ok": True}, "error": {"code": 1, "message": "m"}}),
        ("error", {"error": {"code": -1, "message": "m", "data": None, "extra": 1}, "_meta": None}),
    ]),
    *_cases(SessionConfigOption, "config", [
        ("select-grouped", {**_SELECT, "currentValue": "fast", "options": [
            {"groupId": "g", "name": "G", "options": _SELECT_VALUES}]}),
        ("boolean-false", {"configId": "v", "name": "V", "type": "boolean", "currentValue": False}),
        ("other-without-current", {"configId": "o", "name": "O", "type": "_slider"}),
        ("other-any-current", {"configId": "o", "name": "O", "type": "_slider", "currentValue": {"at": 3}}),
    ]),
    *_cases(SetSessionConfigOptionRequest, "set-config", [
        ("other-null", {"type": "_slider", "value": None}),
        ("other-object", {"type": "_slider", "value": {"at": 3}}),
    ], base={"sessionId": "s", "configId": "c"}),
]


@needs_schema
@pytest.mark.parametrize(("model", "payload"), _SCHEMA_REFUSES)
def test_what_the_schema_refuses_the_model_refuses(model: type[BaseModel], payload: dict[str, Any]) -> None:
    assert not _validator(model.__name__).is_valid(payload), "the case is not one the schema refuses"
    with pytest.raises(ValidationError):
        model.model_validate(payload)
    with pytest.raises(ValidationError):
        model.model_validate(payload, strict=True)


@needs_schema
@pytest.mark.parametrize(("model", "payload"), _SCHEMA_ACCEPTS)
def test_what_the_schema_accepts_the_model_accepts(model: type[BaseModel], payload: dict[str, Any]) -> None:
    assert_valid(payload, model.__name__)
    model.model_validate(payload, strict=True)
    assert roundtrip(model.model_validate(payload)) == payload


def test_python_construction_is_checked_too() -> None:
    with pytest.raises(ValidationError, match="url-mode elicitation needs elicitationId and url"):
        CreateElicitationRequest(session_id="s", mode="url", message="Sign in")
    with pytest.raises(ValidationError, match="form-mode elicitation needs requestedSchema"):
        CreateElicitationRequest(request_id=1, mode="form", message="Name?")
    with pytest.raises(ValidationError, match="exactly one scope"):
        CreateElicitationRequest(session_id="s", request_id=1, mode="form", message="?", requested_schema=_FORM)
    with pytest.raises(ValidationError, match="exactly one scope"):
        CreateElicitationRequest(tool_call_id="c", mode="form", message="?", requested_schema=_FORM)
    with pytest.raises(ValidationError, match="result"):
        MessageMcpResponse()
    with pytest.raises(ValidationError, match="result"):
        MessageMcpResponse(error=None, meta={})
    assert to_wire(MessageMcpResponse(result=None)) == {"result": None}
    with pytest.raises(ValidationError, match="string currentValue"):
        SessionConfigOption(type="select", config_id="m", name="M", options=[SessionConfigSelectOption(
            value="a", name="A")])
    with pytest.raises(ValidationError, match="needs options"):
        SessionConfigOption(type="select", config_id="m", name="M", current_value="a")
    with pytest.raises(ValidationError, match="boolean currentValue"):
        SessionConfigOption(type="boolean", config_id="v", name="V")
    with pytest.raises(ValidationError, match='type "boolean" takes a boolean'):
        SetSessionConfigOptionRequest(session_id="s", config_id="v", type="boolean", value="on")


# --------------------------------------------------------------------------- single-key changes

# Where the models knowingly accept a change the schema refuses: (change, path suffix) -> why.
_LENIENT: dict[tuple[str, str], str] = {
    **{
        ("null", path): "x-deserialize-default-on-null: read as [] and sent as []"
        for path in (
            "mcpServers",
            "additionalDirectories",
            "mcpServers/#/args",
            "mcpServers/#/env",
            "mcpServers/#/headers",
            "authMethods/#/args",
            "authMethods/#/env",
            "sessions/#/additionalDirectories",
        )
    },
    ("drop", "availableCommands/#/type"): "a constant the model fills in and always sends",
    ("drop", "requestedSchema/type"): "a constant the model fills in and always sends",
    ("empty", "prompt"): "PromptRequest leaves refusing an empty prompt to the agent",
}


def _changes(node: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """``(path, change)`` of every single-key change to try on ``node``."""
    if isinstance(node, dict):
        for key, value in node.items():
            here = (*path, key)
            yield here, "drop"
            if value is not None:
                yield here, "null"
            if isinstance(value, str):
                yield here, "int"
            elif not isinstance(value, dict | list):
                yield here, "str"
            yield from _changes(value, here)
    elif isinstance(node, list):
        if node:
            yield path, "empty"
        for index, item in enumerate(node):
            yield from _changes(item, (*path, index))


def _changed(payload: Any, path: tuple[str | int, ...], change: str) -> Any:
    copy = json.loads(json.dumps(payload))
    parent = copy
    for step in path[:-1]:
        parent = parent[step]
    if change == "drop":
        del parent[path[-1]]
    else:
        parent[path[-1]] = {"null": None, "int": 12345, "str": "zz", "empty": []}[change]
    return copy


@cache
def _narrowed_validator(def_name: str, tag: str) -> Draft202012Validator | None:
    """The validator of ``$defs[def_name]`` with its tagged ``anyOf`` cut down to the branch for ``tag``."""
    definition = _schema()["$defs"][def_name]
    branches = definition.get("anyOf", [])
    other = next((b for b in branches if b.get("title") == "other"), None)
    if other is None:
        return None
    key = other["required"][0]
    for branch in branches:
        if branch.get("properties", {}).get(key, {}).get("const") == tag:
            rest = {k: v for k, v in definition.items() if k != "anyOf"}
            rest["allOf"] = [*rest.get("allOf", []), branch]
            return Draft202012Validator({**rest, "$defs": _schema()["$defs"]})
    return None


def _tag(def_name: str, instance: Any) -> str | None:
    other = next((b for b in _schema()["$defs"][def_name].get("anyOf", []) if b.get("title") == "other"), None)
    if other is None or not isinstance(instance, dict):
        return None
    tag = instance.get(other["required"][0])
    return tag if isinstance(tag, str) else None


def _schema_accepts(instance: Any, def_name: str) -> bool:
    """Draft 2020-12 verdict of ``$defs[def_name]`` on ``instance``.

    The same verdict as ``_validator(def_name).is_valid``, reached faster: on a tagged union
    (an ``anyOf`` of ``const`` branches and an ``other`` branch that excludes them) a known tag
    selects the one branch that can match, and a notification's ``update`` is judged apart from
    its independent siblings.
    """
    if def_name == "UpdateSessionNotification" and isinstance(instance, dict) and "update" in instance:
        return _schema_accepts(instance["update"], "SessionUpdate") and _validator(def_name).is_valid(
            {**instance, "update": _STUB_UPDATE}
        )
    tag = _tag(def_name, instance)
    narrowed = _narrowed_validator(def_name, tag) if tag is not None else None
    return bool((narrowed or _validator(def_name)).is_valid(instance))


def _change_subjects() -> list[Any]:
    """``(model or union, $defs name, payload)`` of every reference example and sample."""
    subjects: list[Any] = []
    for param in _reference_examples():
        kind, name, message = param.values
        if message is None:
            continue
        target, payload = _example_target(kind, name, message)
        def_name = name if kind == "def" else target.__name__
        subjects.append(pytest.param(target, def_name, payload, id=param.id))
    for sample in method_samples():
        subjects.append(pytest.param(type(sample), type(sample).__name__, to_wire(sample), id=type(sample).__name__))
    for sample in session_update_samples():
        subjects.append(pytest.param(SessionUpdate, "SessionUpdate", to_wire(sample), id=type(sample).__name__))
    return subjects


def _accepts(target: Any, payload: Any, *, strict: bool) -> Any | None:
    try:
        return _parse(target, payload, strict=strict)
    except ValidationError:
        return None


_ABSENT = object()


def _child(parent: Any, step: str | int) -> Any:
    """What ``parent`` (a model, dict or list) holds under the wire key or index ``step``."""
    if isinstance(parent, BaseModel):
        for attr, field in type(parent).model_fields.items():
            if (field.alias or attr) == step:
                return getattr(parent, attr)
        return (parent.__pydantic_extra__ or {}).get(str(step), _ABSENT)
    if isinstance(parent, dict):
        return parent.get(step, _ABSENT)
    if isinstance(parent, list) and isinstance(step, int) and step < len(parent):
        return parent[step]
    return _ABSENT


@cache
def _tag_keys() -> frozenset[str]:
    """The keys that tag the schema's unions (``type``, ``sessionUpdate``, ...)."""
    return frozenset(
        branch["required"][0]
        for definition in _schema()["$defs"].values()
        for branch in definition.get("anyOf", [])
        if branch.get("title") == "other" and branch.get("required")
    )


@cache
def _variant_defs() -> frozenset[str]:
    """``$defs`` entries used as a branch of a union, which may add keys of its own around them."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for keyword in ("anyOf", "oneOf"):
                for branch in node.get(keyword, []):
                    for sub in branch.get("allOf", []):
                        if "$ref" in sub:
                            names.add(sub["$ref"].removeprefix("#/$defs/"))
            for key, value in node.items():
                walk(list(value.values()) if key == "properties" else value)

    walk(_schema()["$defs"])
    return frozenset(names)


def _judge_locally(model: Any, path: tuple[str | int, ...]) -> tuple[str, int] | None:
    """``($defs name, depth)`` of the deepest schema-named model on ``path`` that holds the change.

    The rest of the payload is untouched and valid, so validating the changed subtree there
    against that ``$defs`` entry is enough for the verdict, and far cheaper than judging the
    whole message again for every change. The object whose own key changes is judged there
    only if nothing around it adds rules: not for a union's tag, nor for a union member.
    """
    found = None
    node = model
    for depth, step in enumerate(path[:-1], start=1):
        node = _child(node, step)
        if node is _ABSENT:
            break
        name = type(node).__name__
        if not isinstance(node, BaseModel) or name not in _schema()["$defs"]:
            continue
        if depth == len(path) - 1 and (path[-1] in _tag_keys() or name in _variant_defs()):
            continue
        found = (name, depth)
    return found


_STUB_UPDATE = {"sessionUpdate": "plan_removed", "planId": "p"}


def _verdict(changed: Any, def_name: str, local: tuple[str, int] | None, path: tuple[str | int, ...]) -> bool:
    if def_name == "UpdateSessionNotification" and path[0] != "update" and "update" in changed:
        return _schema_accepts({**changed, "update": _STUB_UPDATE}, def_name)  # the update is untouched
    if local is None:
        return _schema_accepts(changed, def_name)
    local_def, depth = local
    subtree = changed
    for step in path[:depth]:
        subtree = subtree[step]
    return _schema_accepts(subtree, local_def)


@needs_schema
@pytest.mark.parametrize(("target", "def_name", "payload"), _change_subjects())
def test_single_key_changes_get_the_schema_verdict(target: Any, def_name: str, payload: Any) -> None:
    assert _schema_accepts(payload, def_name)
    original = _parse(target, payload)
    disagreements: list[str] = []
    for path, change in _changes(payload):
        changed = _changed(payload, path, change)
        where = "/".join("#" if isinstance(step, int) else step for step in path)
        schema_says = _verdict(changed, def_name, _judge_locally(original, path), path)
        model = _accepts(target, changed, strict=schema_says)
        if schema_says == (model is not None):
            if model is not None and to_wire(model) != changed:
                assert _schema_accepts(to_wire(model), def_name), f"{change} {where}: re-serialized, fails the schema"
            continue
        if _schema_accepts(changed, def_name) != schema_says:  # a disagreement: judged on the whole message
            continue
        if schema_says:
            disagreements.append(f"{change} {where}: the schema accepts, the model refuses")
        elif not any(
            change == lenient_change and (where == suffix or where.endswith("/" + suffix))
            for lenient_change, suffix in _LENIENT
        ):
            disagreements.append(f"{change} {where}: the schema refuses, the model accepts")
    assert not disagreements, "\n".join(disagreements)


@needs_schema
def test_null_as_empty_fields_are_the_schema_default_on_null_ones() -> None:
    defs = _schema()["$defs"]
    ours = {
        (name, field.alias or attr)
        for name in schema.__all__
        if isinstance(cls := getattr(schema, name), type) and issubclass(cls, BaseModel)
        for attr, field in cls.model_fields.items()
        if EmptyIfNull in field.metadata
    }
    theirs = {
        (name, prop)
        for name, definition in defs.items()
        for prop, node in definition.get("properties", {}).items()
        if node.get("x-deserialize-default-on-null")
    }
    assert ours == theirs
    assert {suffix.rsplit("/", 1)[-1] for change, suffix in _LENIENT if change == "null"} == {p for _, p in theirs}
