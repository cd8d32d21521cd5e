"""Ids are random as a whole: unique, and telling nothing about ids made before or elsewhere."""

from __future__ import annotations

import os
import re
from itertools import pairwise

import pytest

from acp_agent._util.ids import new_id, new_session_id


def test_item_ids_are_random_hex_after_their_prefix() -> None:
    ids = [new_id("msg") for _ in range(20000)]
    assert all(re.fullmatch(r"msg_[0-9a-f]{16}", i) for i in ids)
    assert len(set(ids)) == len(ids)
    # No shared part (a process token) and no counter: consecutive ids agree on their first
    # four hex digits only by chance (1 in 65536 per pair).
    same_head = sum(a[4:8] == b[4:8] for a, b in pairwise(ids))
    assert same_head < 10
    tails = [int(i[4:], 16) for i in ids[:1000]]
    assert sum(b - a == 1 for a, b in pairwise(tails)) == 0


def test_session_ids_keep_their_format() -> None:
    ids = {new_session_id() for _ in range(5000)}
    assert len(ids) == 5000
    assert all(re.fullmatch(r"sess_[a-z2-7]{16}", i) for i in ids)
    assert re.fullmatch(r"sess_[a-z2-7]{16}", new_id("sess"))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_never_repeats_its_parents_ids() -> None:
    new_id("msg")  # the pool holds random bits the child would share if it kept them
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, then out without running the parent's clean-ups
        os.write(write_end, " ".join(new_id("msg") for _ in range(3)).encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    with os.fdopen(read_end) as pipe:
        child = set(pipe.read().split())
    parent = {new_id("msg") for _ in range(3)}
    assert len(child) == 3
    assert not child & parent
