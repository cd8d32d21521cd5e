"""The coding example served with a directory per user (the hosting guide): ``serve team_workspace.py --tokens ...``."""

from coding_agent import agent  # examples/coding_agent.py on the path

from acp_agent import Workspace

agent.workspace = Workspace(roots={"alice": "/srv/work/alice", "bob": "/srv/work/bob"})
