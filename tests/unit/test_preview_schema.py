"""The Preview shapes (V2-PREVIEW §1, P22) are kept apart from the official 2.4.0 schema files and merged by the
validator, so every message the test client sees is checked against them."""

from __future__ import annotations

import json
from typing import Any

from acp_agent.testing import SchemaValidator, default_schema_path
from acp_agent.testing.schema import merge_preview, packaged_schema


def update(sid: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": body}}


def test_the_official_files_are_untouched() -> None:
    for unstable in (True, False):
        text = default_schema_path(unstable=unstable).read_text(encoding="utf-8")
        assert "replay_complete" not in text and "idempotencyKey" not in text


def test_merged_schema_knows_the_preview_shapes() -> None:
    defs = packaged_schema()["$defs"]
    assert {"ReplayComplete", "PromptSuggestionsUpdate", "PromptSuggestion", "IdempotencyKey",
            "ClientSessionCapabilities", "PromptSuggestionsCapabilities"} <= defs.keys()
    assert "idempotencyKey" in defs["PromptRequest"]["properties"]
    assert "session" in defs["ClientCapabilities"]["properties"]
    other = defs["SessionUpdate"]["anyOf"][-1]
    assert other["title"] == "other"
    excluded = {v["properties"]["sessionUpdate"]["const"] for v in other["not"]["anyOf"]}
    assert {"replay_complete", "prompt_suggestions_update"} <= excluded


def test_validator_checks_preview_updates() -> None:
    validator = SchemaValidator()
    assert validator.check(update("s", {"sessionUpdate": "replay_complete"})) == []
    good = {"sessionUpdate": "prompt_suggestions_update", "suggestions": [{"prompt": [{"type": "text", "text": "x"}]}]}
    assert validator.check(update("s", good)) == []
    assert validator.check(update("s", {**good, "suggestions": []})) == []  # [] withdraws them
    assert validator.check(update("s", {**good, "suggestions": [{"prompt": []}]}))  # P19: never empty
    assert validator.check(update("s", {"sessionUpdate": "prompt_suggestions_update"}))  # suggestions required


def test_an_official_definition_wins_over_the_preview_one() -> None:
    schema = {"$defs": {"ReplayComplete": {"type": "object", "official": True},
                        "SessionUpdate": {"anyOf": [{"title": "other", "not": {"anyOf": []}}]}}}
    merge_preview(schema, {"$defs": {"ReplayComplete": {"type": "object"}, "New": {"type": "string"}},
                           "x-add-variants": {"SessionUpdate": [
                               {"type": "object", "properties": {"sessionUpdate": {"const": "x"}},
                                "required": ["sessionUpdate"], "allOf": []}]}})
    assert schema["$defs"]["ReplayComplete"] == {"type": "object", "official": True}
    assert schema["$defs"]["New"] == {"type": "string"}
    union = schema["$defs"]["SessionUpdate"]["anyOf"]
    assert [v.get("title") for v in union] == [None, "other"] and len(union[-1]["not"]["anyOf"]) == 1
    json.dumps(schema)
