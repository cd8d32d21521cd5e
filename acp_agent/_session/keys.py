"""Idempotency keys of ``session/prompt``: at most one user message per key in a session (ACP v2 Preview P1-P7).

A client that is not sure its prompt arrived (a dropped connection, a timeout) sends it again with the same
``idempotencyKey``; every attempt after the first is answered with the first one's ``messageId`` and starts
nothing. The runtime asks `PromptKeys.find` before it queues a prompt, for every transport alike:

- the key's prompt is inserted already (answered, running or long done): the stored ``messageId``;
- the key's prompt is held (queued behind a running turn, not yet answered): that same held job, so the retry
  is answered when the original is, with the same outcome (a cancel of either withdraws it);
- the key is known but the prompt differs: ``-32602`` naming the key (keys name one submission; the content
  is compared through a digest, not interpreted);
- otherwise it is a new submission.

A key is spent only when its prompt is inserted: a prompt refused or withdrawn before insertion (an error
answer, ``session/cancel``, ``$/cancel_request``, the connection ending) leaves the key free, so a retry
submits it anew. Spent keys are kept with the session's record (``SessionRecord.prompt_keys``: every store keeps
them, so they survive a restart and ``session/close`` + ``session/resume``), the newest
``Limits.idempotency_keys`` of them, each for ``Limits.idempotency_key_age`` seconds.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any, Final, Generic, Protocol, TypeVar

from ..errors import RequestError
from ..records import SessionRecord
from ..schema import ContentBlock


class KeyedJob(Protocol):
    """What the keys see of a prompt's job (``turns.ForegroundJob``)."""

    key: str | None
    digest: str
    message_id: str | None


J = TypeVar("J", bound=KeyedJob)

__all__ = ["KEY_MISMATCH", "PromptKeys", "prompt_digest"]

KEY_MISMATCH: Final = "idempotencyKey was already used for a different prompt in this session"
"""The ``-32602`` message of a prompt whose key names another submission."""


def prompt_digest(prompt: Sequence[ContentBlock]) -> str:
    """A digest of a prompt's blocks as the wire carries them (what a retry must repeat)."""
    digest = hashlib.blake2b(digest_size=16)
    for block in prompt:
        digest.update(block.__pydantic_serializer__.to_json(block, by_alias=True, exclude_unset=True))
        digest.update(b"\n")
    return digest.hexdigest()


class PromptKeys(Generic[J]):
    """The idempotency keys of one session: held (in memory) and spent (in the record)."""

    __slots__ = ("_held", "_record", "age", "limit")

    def __init__(self, record: SessionRecord, *, limit: int, age: float) -> None:
        self._record = record
        self._held: dict[str, tuple[str, J]] = {}
        self.limit = limit
        """How many spent keys are kept (the newest)."""
        self.age = age
        """Seconds a spent key is kept."""

    def find(self, key: str, digest: str) -> J | str | None:
        """The held job or the ``messageId`` an earlier attempt with ``key`` got, or ``None`` for a new key.

        Raises ``-32602`` if ``key`` was used for a prompt whose digest is not ``digest``.
        """
        held = self._held.get(key)
        if held is not None:
            _same(key, held[0], digest)
            return held[1]
        spent = self._record.prompt_keys.get(key)
        if spent is None:
            return None
        if time.time() - float(spent.get("at", 0)) > self.age:
            del self._record.prompt_keys[key]
            return None
        _same(key, str(spent.get("digest")), digest)
        return str(spent["messageId"])

    def hold(self, key: str, digest: str, job: J) -> None:
        """Note ``job`` as the held attempt of ``key`` (or spend the key at once if it is inserted)."""
        job.key, job.digest = key, digest
        if job.message_id is not None:
            self.inserted(job)
        else:
            self._held[key] = (digest, job)

    def inserted(self, job: J) -> None:
        """``job`` was inserted: its key is spent, with the new message's id (oldest keys dropped past the bounds)."""
        key = job.key
        if key is None or job.message_id is None:
            return
        if self._held.get(key, (None, None))[1] is job:
            del self._held[key]
        keys = self._record.prompt_keys
        keys.pop(key, None)
        now = time.time()
        keys[key] = {"messageId": job.message_id, "digest": job.digest, "at": now}
        _prune(keys, self.limit, now - self.age)

    def dropped(self, job: J) -> None:
        """``job`` was withdrawn or refused before insertion: its key is free again."""
        key = job.key
        if key is not None and self._held.get(key, (None, None))[1] is job:
            del self._held[key]


def _same(key: str, known: str, digest: str) -> None:
    if known != digest:
        raise RequestError.invalid_params(KEY_MISMATCH, {"idempotencyKey": key})


def _prune(keys: dict[str, dict[str, Any]], limit: int, oldest: float) -> None:
    """Drop the keys spent before ``oldest`` and, past ``limit``, the oldest ones (dict order is spending order)."""
    while keys:
        first = next(iter(keys))
        if len(keys) <= limit and float(keys[first].get("at", 0)) >= oldest:
            return
        del keys[first]
