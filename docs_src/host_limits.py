from acp_agent import Limits
from docs_src.first_agent import EchoAgent  # imported: `serve` does not count it, only classes defined here


class HostAgent(EchoAgent):
    """The agent `python -m acp_agent serve docs_src/host_limits.py --tokens tokens.txt` serves."""

    limits = Limits(max_principal_sessions=2, max_principal_processes=4, max_principal_connections=3)
