"""The inspector page's example: connect_remote against ``python -m acp_agent serve`` on loopback."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.remote import ROOT, served_agent


def test_connect_remote_example_prints_the_answers() -> None:
    with served_agent(ROOT / "docs_src" / "first_agent.py", "--token", "s3cret", "--store", "memory") as served:
        done = subprocess.run([sys.executable, "-m", "docs_src.testing_remote", served.url], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["websocket", "http"]
    assert all("hello" in line and line.endswith("end_turn") for line in lines)
