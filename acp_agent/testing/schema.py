"""Validate agent-to-client traffic against the official ACP v2 JSON Schema.

Each message the agent sent is checked twice: against the schema's top-level envelope
for agent messages, and its params (or, for an answer, its result) against the exact
``$defs`` entry for that method, found through the schema's ``x-method`` / ``x-side``
annotations. Answers are matched to the client's requests by id.

The official schemas ship inside this package (``schemas/acp-v2-schema.json`` and
``schemas/acp-v2-schema.unstable.json``, byte-identical copies of ``schema/v2/schema.json`` and
``schema/v2/schema.unstable.json`` from the ``@agentclientprotocol/sdk`` 2.4.0 npm package);
[`default_schema_path`][acp_agent.testing.default_schema_path] finds them. The ACP v2 Preview shapes they lack
(``idempotencyKey``, ``replay_complete``, ``prompt_suggestions_update``, ``capabilities.session``) are kept apart, in
``schemas/preview/*.json``, and merged in by `packaged_schema` (so a newer official schema can replace both).
Needs the ``jsonschema`` package, imported when the first [`SchemaValidator`][acp_agent.testing.SchemaValidator] is
built.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from .transcript import TranscriptEntry

__all__ = ["SchemaValidator", "default_schema_path", "merge_preview", "packaged_schema"]


def _packaged_schema(unstable: bool) -> Traversable:
    name = "acp-v2-schema.unstable.json" if unstable else "acp-v2-schema.json"
    return files(__package__ or "acp_agent.testing").joinpath("schemas", name)


def default_schema_path(*, unstable: bool = True) -> Path:
    """The official v2 schema shipped in this package: the unstable one (with draft features) by default.

    ``unstable=False`` gives the stable schema. [`SchemaValidator`][acp_agent.testing.SchemaValidator] uses the unstable
    one, since it describes every feature this SDK speaks (background work, terminals, subagents).
    """
    return Path(str(_packaged_schema(unstable)))


def packaged_schema(*, unstable: bool = True) -> dict[str, Any]:
    """The official v2 schema shipped in this package with the Preview shapes merged in (`merge_preview`)."""
    schema: dict[str, Any] = json.loads(_packaged_schema(unstable).read_text(encoding="utf-8"))
    folder = files(__package__ or "acp_agent.testing").joinpath("schemas", "preview")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            merge_preview(schema, json.loads(entry.read_text(encoding="utf-8")))
    return schema


def merge_preview(schema: dict[str, Any], preview: dict[str, Any]) -> None:
    """Merge one Preview file into ``schema`` in place: its ``$defs`` are added (an official definition of the same
    name wins: a newer schema that has it is left alone), ``x-add-properties`` adds properties to existing object
    definitions, and ``x-add-variants`` adds variants to existing unions, before their catch-all ``other`` variant
    (whose exclusion list learns the new discriminators)."""
    defs: dict[str, Any] = schema["$defs"]
    for name, definition in preview.get("$defs", {}).items():
        defs.setdefault(name, definition)
    for name, properties in preview.get("x-add-properties", {}).items():
        for key, value in properties.items():
            defs[name].setdefault("properties", {}).setdefault(key, value)
    for name, variants in preview.get("x-add-variants", {}).items():
        union: list[Any] = defs[name]["anyOf"]
        other = union[-1] if union and union[-1].get("title") == "other" else None
        known = {_discriminator(v) for v in union}
        for variant in variants:
            if _discriminator(variant) in known:
                continue
            union.insert(len(union) - 1 if other is not None else len(union), variant)
            if other is not None and "not" in other:
                other["not"]["anyOf"].append({key: variant[key] for key in ("type", "properties", "required")})


def _discriminator(variant: dict[str, Any]) -> Any:
    """The ``const`` of a union variant's one discriminating property, if it has one."""
    for prop in variant.get("properties", {}).values():
        if isinstance(prop, dict) and "const" in prop:
            return prop["const"]
    return None


class SchemaValidator:
    """Checks agent-to-client messages against one schema file (default: the packaged unstable v2 schema with the
    Preview shapes merged in, `packaged_schema`)."""

    def __init__(self, schema_path: str | Path | None = None) -> None:
        from jsonschema import Draft202012Validator

        if schema_path is not None:
            self.schema: dict[str, Any] = json.loads(Path(schema_path).read_text(encoding="utf-8"))
        else:
            self.schema = packaged_schema(unstable=True)
        self._defs: dict[str, Any] = self.schema["$defs"]
        self._validator_cls = Draft202012Validator
        envelopes = {entry.get("title"): entry for entry in self.schema["anyOf"]}
        self._envelope = self._compile({"anyOf": [envelopes["Agent"], envelopes["ProtocolLevel"]]})
        self._cache: dict[str, Any] = {}
        self._by_method: dict[tuple[str, str], str] = {}
        for name, definition in self._defs.items():
            method = definition.get("x-method")
            if method is None:
                continue
            for suffix in ("Request", "Response", "Notification"):
                if name.endswith(suffix):
                    self._by_method[(method, suffix)] = name

    def _compile(self, schema: dict[str, Any]) -> Any:
        return self._validator_cls({**schema, "$defs": self._defs})

    def _def_validator(self, name: str) -> Any:
        validator = self._cache.get(name)
        if validator is None:
            validator = self._cache[name] = self._compile({"$ref": f"#/$defs/{name}"})
        return validator

    def check(self, message: Any, answered_method: str | None = None) -> list[str]:
        """Problems with one agent-sent message (empty when valid).

        ``answered_method`` is the method of the client request this message answers.
        """
        problems = [_describe(e) for e in self._envelope.iter_errors(message)][:1]
        if not isinstance(message, dict):
            return problems or ["not a JSON object"]
        method = message.get("method")
        if method is not None:
            suffix = "Request" if "id" in message else "Notification"
            name = self._by_method.get((method, suffix))
            if name is None and not str(method).startswith("_"):
                problems.append(f"no schema definition for {suffix.lower()} {method!r}")
            elif name is not None:
                problems += [f"{name}: {_describe(e)}" for e in self._def_validator(name).iter_errors(
                    message.get("params"))]
        elif "result" in message and answered_method is not None:
            name = self._by_method.get((answered_method, "Response"))
            if name is not None:
                problems += [f"{name}: {_describe(e)}" for e in self._def_validator(name).iter_errors(
                    message["result"])]
        return problems

    def check_transcript(self, transcript: Iterable[TranscriptEntry]) -> list[str]:
        """Problems with every agent-sent message of a transcript, each naming the message."""
        asked: dict[tuple[type, Any], str] = {}
        problems: list[str] = []
        for entry in transcript:
            message = entry.message
            if entry.direction == "client->agent":
                if isinstance(message, dict) and "method" in message and "id" in message:
                    asked[(type(message["id"]), message["id"])] = message["method"]
                continue
            method = None
            if isinstance(message, dict) and "method" not in message and "id" in message:
                method = asked.pop((type(message["id"]), message["id"]), None)
            for problem in self.check(message, method):
                problems.append(f"{problem}\n    in {json.dumps(message)[:500]}")
        return problems


def _describe(error: Any) -> str:
    path = "/".join(str(p) for p in error.absolute_path)
    return f"at '{path}': {error.message[:300]}"
