"""The release check: the sdist and wheel build (`python -m build`), pass `twine check`, and the wheel installed
into a fresh virtual environment runs the site's first agent with no checkout on the path. The distribution is
``acp-agent-sdk``; it installs the package ``acp_agent`` and the ``acp-agent`` command.

Offline by design: the build runs without isolation (hatchling comes with the test extra), the wheel goes into
the new environment with ``--no-deps --no-index``, and its dependencies are read from this environment's
site-packages through a ``.pth`` line. Path entries added by a ``.pth`` line are not site directories, so this
environment's editable install of acp-agent (itself a ``.pth`` line naming the checkout) is not processed
there: ``import acp_agent`` in the new environment can only find the installed wheel, which the test checks."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from acp_agent.testing import spawn_agent

pytestmark = pytest.mark.release

ROOT = Path(__file__).resolve().parents[2]


def run(*command: str | Path, cwd: Path) -> str:
    """Run ``command`` without this process's ``PYTHONPATH`` (it may name a checkout), and return its stdout."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and wheel of this checkout, built as a release would be."""
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT, cwd=ROOT)
    return out


def test_the_sdist_and_wheel_pass_twine_check(dist: Path) -> None:
    [sdist] = dist.glob("acp_agent_sdk-*.tar.gz")
    [wheel] = dist.glob("acp_agent_sdk-*-py3-none-any.whl")
    output = run(sys.executable, "-m", "twine", "check", "--strict", sdist, wheel, cwd=dist)
    assert output.count("PASSED") == 2


@pytest.mark.anyio
async def test_the_wheel_runs_the_first_agent_in_a_fresh_venv(dist: Path, tmp_path: Path) -> None:
    [wheel] = dist.glob("acp_agent_sdk-*-py3-none-any.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    fresh_site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path)
                      .strip())
    run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index", wheel,
        cwd=tmp_path)
    (fresh_site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # after the wheel

    work = tmp_path / "work"  # no checkout here: the agent file alone, as an author would have it
    work.mkdir()
    agent_file = shutil.copy(ROOT / "docs_src" / "first_agent.py", work / "my_agent.py")
    where = run(python, "-c", "import acp_agent, importlib.metadata as m; print(acp_agent.__file__); "
                "print(m.metadata('acp-agent-sdk')['Name'])", cwd=work).split()
    assert Path(where[0]).is_relative_to(fresh_site), where  # the wheel's copy, not the checkout
    assert not Path(where[0]).is_relative_to(ROOT)
    assert where[1] == "acp-agent-sdk"  # our distribution name (acp-agent on PyPI is another project)
    assert (env_dir / "bin" / "acp-agent").exists()  # the command keeps its name

    async with spawn_agent([str(python), str(agent_file)], env={"PYTHONPATH": ""}) as client:
        answer = await client.initialize()
        assert answer["info"]["name"] == "echo-agent"
        sid = await client.new_session(str(work))
        view = await client.prompt_and_wait(sid, "hello from a wheel")
        assert list(view.messages().values()) == ["hello from a wheel"]


def test_every_install_line_names_our_distribution() -> None:
    """The PyPI project named like our command is an unrelated one: every install line and every extra in
    brackets, in a tracked text file, names the distribution of ``pyproject.toml`` instead."""
    import tomllib

    name = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    assert name == "acp-agent-sdk"
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if listing.returncode != 0:
        pytest.skip("not a git checkout")
    wrong = re.compile(r"pip install[^\n]*?\bacp-agent(?![\w-])|\bacp-agent\[")
    found = []
    for file in filter(None, listing.stdout.decode().split("\0")):
        path = ROOT / file
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        found += [f"{file}: {match.group()}" for match in wrong.finditer(text)]
    assert not found, "install lines naming another project:\n" + "\n".join(found)
