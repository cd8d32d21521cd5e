"""Two ``python -m acp_agent serve`` processes on one SQLite file (issue 27, section 4): a session active on one is
refused on the other (``-32002`` "Session is active in another process") until it is closed there or its
connection ends (a killed agent's locks: ``tests/e2e/test_hosting_durability.py``). Every message the agents send
is schema-checked."""

from __future__ import annotations

from pathlib import Path

from acp_agent.store.keeper import ACTIVE_IN_ANOTHER_PROCESS
from acp_agent.testing import SchemaValidator
from tests.e2e.test_http_faults import ECHO_AGENT
from tests.e2e.test_http_reconnect import Client, replayed_texts
from tests.helpers.remote import served_agent


def test_a_session_active_in_one_server_is_refused_by_another_on_the_same_file(
    validator: SchemaValidator, tmp_path: Path
) -> None:
    store = ("--store", f"sqlite:{tmp_path / 'shared.sqlite3'}")
    with served_agent(ECHO_AGENT, *store) as one, served_agent(ECHO_AGENT, *store) as two:
        first, second = Client(one, validator), Client(two, validator)
        sid = first.new_session()
        first.prompt_and_wait(sid, "live on server one")
        for method, params in (("session/resume", {"sessionId": sid, "cwd": "/tmp"}),
                               ("session/delete", {"sessionId": sid})):
            refused, _ = second.call(method, params, sid)
            assert refused["error"] == {"code": -32002, "message": ACTIVE_IN_ANOTHER_PROCESS,
                                        "data": {"sessionId": sid}}, refused
        first.prompt_and_wait(sid, "still live on server one")
        first.call("session/close", {"sessionId": sid}, sid)  # saved, then let go
        answer, before = second.resume(sid)
        assert "result" in answer, answer
        assert replayed_texts(before)[-1:] == ["still live on server one"]
        second.prompt_and_wait(sid, "now on server two")
        refused, _ = first.resume(sid)
        assert refused["error"]["message"] == ACTIVE_IN_ANOTHER_PROCESS, refused
        second.delete()  # the connection's end saves its sessions and lets them go
        third = Client(one, validator)
        answer, before = third.resume(sid)
        assert "result" in answer, answer
        assert "now on server two" in replayed_texts(before)
        third.delete()
