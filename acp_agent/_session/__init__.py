"""One session's engine: the core and its factory, turns, snapshots, the sink, the registry, questions."""
