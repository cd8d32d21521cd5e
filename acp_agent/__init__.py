"""acp-agent."""
