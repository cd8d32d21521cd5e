"""No tracked text file names a folder of the machine it was written on.

The rule, precisely. A tracked file (``git ls-files``) is text when its bytes hold no NUL and decode as UTF-8;
images and other binary files are not read (the inspector screenshots are kept neutral by
``tools/inspector_screenshots.py``, which runs the agent from a neutral folder). In a text file, an absolute path
that starts where a path can start (not right after a letter, digit, ``.``, ``-``, ``_``, ``/``, ``<`` or ``>``,
so ``/proc/<pid>/root/...`` or ``a/tmp/x`` are not paths of their own) is a machine path when it is:

- this checkout's folder (as given and resolved), or a path under it;
- a path under a machine folder with at least two components: the checkout's parent folder (the other
  worktrees beside it) and the home folder; a home whose user is one of the placeholder users the examples use
  (``me``, ``user``, ``alice``) is skipped, since the examples cannot be told from it;
- a path under this house's fixed machine folders, whatever machine runs the test: a name under ``/work``
  (where the worktrees live), a name under ``/root``, and throwaway folders under ``/tmp`` named like a
  worktree (``wt-``), a pytest base (``pytest-of-``) or a ``tempfile`` folder (``tmp`` and 8 characters).

Examples stay legal: ``/usr/bin/env``, ``/tmp``, ``/tmp/app.py``, ``/home/me/project``, ``/path/to/agent.py``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

GIVEN = Path(__file__).absolute().parents[2]  # the checkout as this process reached it (maybe by a symlink)
ROOT = GIVEN.resolve()

_START = r"(?<![\w.<>/-])"  # where a path may start: not inside a word or another path
_FIXED = (r"/work/[\w.-]+", r"/root/[\w.-]+", r"/tmp/(?:wt-[\w.-]+|pytest-of-[\w.-]+|tmp[a-z0-9_]{8}(?![\w.-]))")
_PLACEHOLDER_USERS = frozenset({"me", "user", "alice"})


def machine_folders() -> list[str]:
    """The folders of this machine whose paths a tracked file must not name (see the module docstring)."""
    folders = {str(GIVEN), str(ROOT)}
    home = Path.home().resolve()
    for folder in (GIVEN.parent, ROOT.parent, home):
        if len(folder.parts) >= 3 and not (folder == home and folder.name in _PLACEHOLDER_USERS):
            folders.add(str(folder))
    return sorted(folders)


def machine_path_pattern() -> re.Pattern[str]:
    """One regex for every machine path: a machine folder itself or a path under it, or a fixed pattern."""
    dynamic = [re.escape(folder) + r"(?:/[\w.-]*)*(?![\w.-])" for folder in machine_folders()]
    return re.compile(_START + "(?:" + "|".join(dynamic + list(_FIXED)) + ")")


def tracked_text_files() -> dict[str, str]:
    """Each tracked text file's path (relative to the checkout) and its text."""
    try:
        listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    texts = {}
    for name in filter(None, listing.decode().split("\0")):
        path = ROOT / name
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            texts[name] = data.decode()
        except UnicodeDecodeError:
            continue
    return texts


def test_no_tracked_text_file_names_a_machine_path() -> None:
    pattern = machine_path_pattern()
    texts = tracked_text_files()
    assert "README.md" in texts and "pyproject.toml" in texts  # the listing works
    found = [f"{name}:{text.count(chr(10), 0, match.start()) + 1}: {match.group()}"
             for name, text in sorted(texts.items()) for match in pattern.finditer(text)]
    assert not found, "absolute paths of a build machine in tracked files:\n" + "\n".join(found)


_ = "/"  # the machine paths below are written with {_} for their first slash, so this file passes its own test


@pytest.mark.parametrize("text", [
    f"see {ROOT}/docs/index.md", f"cd {ROOT}", f"`{ROOT.parent}/wt-other/.venv/bin/python`",
    f"compared {_}work/wt-perf-before and {_}work/main", f"{_}root/.pyenv/versions/3.11.7/bin/python",
    f"cwd: {_}tmp/wt-lazy/examples", f"{_}tmp/pytest-of-root/pytest-1/x", f"({_}tmp/tmpab12cd_3/agent.py)",
])
def test_the_rule_flags_machine_paths(text: str) -> None:
    assert machine_path_pattern().search(text), text


@pytest.mark.parametrize("text", [
    "#!/usr/bin/env python", "a file under /tmp", "/tmp/app.py", "--- a/tmp/app.py", "/home/me/project",
    "/home/user/project", "/proc/<holder>/root/...", "/path/to/agent.py", "git worktree add /tmp/base main",
    "https://example.com/work/x", "src/work/notes", "/tmp/tmpfile.txt",
])
def test_the_rule_leaves_examples_alone(text: str) -> None:
    assert not machine_path_pattern().search(text), text
