"""Leaf helpers that import nothing else of acp-agent: ids, lazy names, the event loop, its monitor, processes."""
