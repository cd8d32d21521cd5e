"""Bridges from agent frameworks to ACP: each subpackage serves one framework's agents as an
[`Agent`][acp_agent.Agent] (``acp_agent.integrations.pydantic_ai``).

Nothing else in ``acp_agent`` imports this package, and a subpackage imports its framework only when
it is imported itself: an agent that does not use a bridge never loads one.
"""
