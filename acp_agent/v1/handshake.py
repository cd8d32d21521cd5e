"""The ``initialize`` exchange in v1 shapes, and the JetBrains AIR extension it negotiates.

Pure functions: the v1 request becomes the v2 one (client info, elicitation, terminal logins), the
v2 answer becomes the v1 one (capabilities as v1 names them, the agent's ``authMethods`` in v1
shape, the AIR declaration when the client made one). A malformed AIR declaration enables nothing.
"""

from __future__ import annotations

from typing import Any, Final

from .messages import obj
from .negotiation import V1_PROTOCOL_VERSION

__all__ = [
    "AIR_CAPABILITY", "air_declared", "air_declares", "v1_auth_methods", "v1_initialize_result", "v2_initialize_params",
]

AIR_CAPABILITY: Final = "asyncTasks"
"""The JetBrains AIR capability under which background work is published as async tasks."""


def air_declared(capabilities: dict[str, Any]) -> bool:
    """The client capabilities carry a well-formed ``_meta.jetbrains.air`` declaration (version 1 or later)."""
    meta = capabilities.get("_meta")
    jetbrains = meta.get("jetbrains") if isinstance(meta, dict) else None
    air = jetbrains.get("air") if isinstance(jetbrains, dict) else None
    if not isinstance(air, dict):
        return False
    version = air.get("version")
    return isinstance(version, int) and not isinstance(version, bool) and version >= 1 and isinstance(
        air.get("capabilities"), list)


def air_declares(capabilities: dict[str, Any], name: str) -> bool:
    """The client's AIR declaration lists the capability ``name``."""
    if not air_declared(capabilities):
        return False
    return name in capabilities["_meta"]["jetbrains"]["air"]["capabilities"]


def v2_initialize_params(params: dict[str, Any], capabilities: dict[str, Any]) -> dict[str, Any]:
    """The v2 ``initialize`` params for a v1 one whose client capabilities are ``capabilities``."""
    info = params.get("clientInfo")
    if not (isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str)):
        info = {"name": "unknown", "version": "unknown"}
    v2: dict[str, Any] = {"protocolVersion": 2, "info": {k: info[k] for k in ("name", "title", "version") if
                                                         isinstance(info.get(k), str)}}
    v2_caps: dict[str, Any] = {}
    elicitation = capabilities.get("elicitation")
    if isinstance(elicitation, dict):
        v2_caps["elicitation"] = elicitation
    if obj(capabilities.get("auth")).get("terminal") is True:  # v1 says `true`, v2 `{}`
        v2_caps["auth"] = {"terminal": {}}
    if v2_caps:
        v2["capabilities"] = v2_caps
    return v2


def v1_auth_methods(methods: Any) -> list[dict[str, Any]]:
    """The agent's v2 ``authMethods`` in v1 shape (``methodId`` is ``id``; a terminal method's ``env`` a map)."""
    out: list[dict[str, Any]] = []
    for method in methods if isinstance(methods, list) else []:
        if not isinstance(method, dict) or not isinstance(method.get("methodId"), str):
            continue
        kind = method.get("type", "agent")
        if kind not in ("agent", "terminal"):
            continue  # a custom type a v1 client cannot use
        v1: dict[str, Any] = {"id": method["methodId"], "name": str(method.get("name", method["methodId"]))}
        if isinstance(method.get("description"), str):
            v1["description"] = method["description"]
        if kind == "terminal":
            v1["type"] = "terminal"
            if method.get("args"):
                v1["args"] = [str(a) for a in method["args"]]
            env = {str(e.get("name")): str(e.get("value")) for e in method.get("env") or [] if isinstance(e, dict)}
            if env:
                v1["env"] = env
        out.append(v1)
    return out


def v1_initialize_result(result: dict[str, Any], client_capabilities: dict[str, Any]) -> dict[str, Any]:
    """The v1 ``initialize`` result for the runtime's v2 one."""
    session_caps = obj(obj(result.get("capabilities")).get("session"))
    prompt = obj(session_caps.get("prompt"))
    mcp = obj(session_caps.get("mcp"))
    v1_session: dict[str, Any] = {"list": {}, "resume": {}, "close": {}}
    for name in ("delete", "additionalDirectories", "fork"):
        if isinstance(session_caps.get(name), dict):
            v1_session[name] = {}
    agent_caps = {
        "loadSession": True,
        "promptCapabilities": {
            "image": prompt.get("image") is not None,
            "audio": prompt.get("audio") is not None,
            "embeddedContext": prompt.get("embeddedContext") is not None,
        },
        "mcpCapabilities": {"http": mcp.get("http") is not None, "sse": False},
        "sessionCapabilities": v1_session,
    }
    methods = v1_auth_methods(result.get("authMethods"))
    if methods:
        agent_caps["auth"] = {"logout": {}}
    v1: dict[str, Any] = {
        "protocolVersion": V1_PROTOCOL_VERSION,
        "agentCapabilities": agent_caps,
        "authMethods": methods,
    }
    if isinstance(result.get("info"), dict):
        v1["agentInfo"] = result["info"]
    if air_declared(client_capabilities):
        v1["_meta"] = {"jetbrains": {"air": {"version": 1, "capabilities": [AIR_CAPABILITY]}}}
    return v1
