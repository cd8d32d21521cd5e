"""The examples of the "Hosting for several users" guide: the multi-user app, the tokens file, the browser socket."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from acp_agent.cli import load_tokens
from acp_agent.http.security import subprotocol_offer

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": 2, "info": {"name": "t", "version": "1"}, "capabilities": {}}}


async def test_the_multi_user_app_knows_who_connects() -> None:
    import docs_src.multi_user as multi_user

    async with multi_user.app.lifespan():
        transport = httpx.ASGITransport(app=multi_user.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            for token, status in (("alice-token", 200), ("bob-token", 200), ("nobody", 401)):
                answer = await http.post("/acp", json=INITIALIZE, headers={"Authorization": f"Bearer {token}"})
                assert answer.status_code == status, answer.text
    assert multi_user.who("bob-token") == "bob" and multi_user.who("eve-token") is None
    assert multi_user.app.options.recheck_interval == 30


def test_the_tokens_file_example_loads(tmp_path: Path) -> None:
    copy = tmp_path / "tokens.txt"
    shutil.copy(ROOT / "docs_src" / "tokens.txt", copy)
    copy.chmod(0o600)
    assert sorted(load_tokens(str(copy))) == ["alice", "bob"]


def test_the_browser_socket_offers_what_the_server_reads() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = (ROOT / "docs_src" / "browser_socket.js").read_text()
    token = "tök+/=en"
    probe = script + f"\nclass WebSocket {{ constructor(url, protocols) {{ this.protocols = protocols; }} }}\n" \
        f"console.log(JSON.stringify(acpSocket('ws://x/acp', {json.dumps(token)}).protocols));"
    done = subprocess.run([node, "-e", probe], capture_output=True, text=True, check=True, timeout=30)
    assert json.loads(done.stdout) == subprotocol_offer(token)


def test_the_multi_user_workspace_keeps_each_user_in_their_directory() -> None:
    import docs_src.multi_user as multi_user

    policy = multi_user.TeamAgent.workspace
    assert policy is not None
    assert policy.allows("bob", "/srv/work/bob/repo") and not policy.allows("bob", "/srv/work/alice")
    assert not policy.allows("eve", "/srv/work/eve") and not policy.allows("alice", "/")


def test_the_team_workspace_example_gives_each_user_a_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    import coding_agent

    # The example sets the shared example agent's workspace: put it back after this test.
    monkeypatch.setattr(coding_agent.agent, "workspace", coding_agent.agent.workspace)
    monkeypatch.delitem(sys.modules, "docs_src.team_workspace", raising=False)
    import docs_src.team_workspace as team

    assert team.agent.workspace is not None
    assert team.agent.workspace.roots == {"alice": "/srv/work/alice", "bob": "/srv/work/bob"}
