"""Where sessions may live: the workspace policy checked on every request that names a directory.

A [`Workspace`][acp_agent.Workspace] says which directories a principal's sessions may use as
``cwd`` or ``additionalDirectories``: one root for everyone, one root per principal, or a callable deciding
``(principal, path)``. The runtime checks it on ``session/new``, ``session/resume`` (an already active session
too), ``session/fork`` and every other request carrying a ``cwd``, before anything changes; a refused path is
answered ``-32602`` with ``data`` naming the field. Paths are compared after resolving symlinks, so a link
inside the root that points out of it is refused too.

An agent declares its own (``Agent.workspace``); a served agent without one gets the directory ``serve`` was
started in (``--workspace DIR`` to choose); a stdio agent without one accepts any absolute path, as before (its
client is its user).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from .errors import RequestError

__all__ = ["Workspace", "WorkspaceCheck", "inside"]

WorkspaceCheck = Callable[[str, str], bool]
"""``(principal, path) -> allowed``: a path (absolute, symlinks resolved) a principal's session may use."""


def inside(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or under it, both compared with symlinks resolved."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([base, real]) == base


@dataclass(frozen=True, slots=True)
class Workspace:
    """A workspace policy: the directories each principal's sessions may use.

    ``root``: one directory every principal's sessions live under. ``roots``: a directory per principal (a
    principal not listed is refused unless ``root`` or ``allow`` lets it in). ``allow``: a callable
    ``(principal, path) -> bool`` for any other rule (it sees the path with symlinks resolved). A path is
    allowed when any of them allows it. ``allow_filesystem_root``: accept ``/`` itself as a ``cwd`` (off:
    a session rooted at ``/`` reaches every file the server can read).
    """

    root: str | None = None
    roots: Mapping[str, str] = field(default_factory=dict)
    allow: WorkspaceCheck | None = None
    allow_filesystem_root: bool = False

    def __post_init__(self) -> None:
        for directory in [self.root, *self.roots.values()]:
            if directory is not None and not os.path.isabs(directory):
                raise ValueError(f"a workspace root must be an absolute path, got {directory!r}")

    def root_of(self, principal: str) -> str | None:
        """The directory ``principal``'s sessions live under (``None`` when only ``allow`` decides)."""
        return self.roots.get(principal, self.root)

    def allows(self, principal: str, path: str) -> bool:
        """Whether a session of ``principal`` may use ``path`` (an absolute path)."""
        real = os.path.realpath(path)
        if real == os.sep and not self.allow_filesystem_root:
            return False
        for root in (self.roots.get(principal), self.root):
            if root is not None and inside(real, root):
                return True
        return self.allow is not None and bool(self.allow(principal, real))

    def check(self, principal: str, cwd: str | None, additional: Iterable[str] | None = None) -> None:
        """Raise ``-32602`` (``data``: the field, the path refused) unless every path is allowed."""
        if cwd is not None and not self.allows(principal, cwd):
            raise RequestError.invalid_params(self._refusal("cwd"), {"field": "cwd", "path": cwd})
        for index, path in enumerate(additional or ()):
            if not self.allows(principal, path):
                raise RequestError.invalid_params(self._refusal("additionalDirectories"),
                                                  {"field": f"additionalDirectories[{index}]", "path": path})

    def _refusal(self, name: str) -> str:
        return f"{name} is outside the workspace this agent serves sessions in"
