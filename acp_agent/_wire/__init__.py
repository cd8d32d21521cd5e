"""JSON-RPC 2.0 without sessions: newline-delimited framing, the connection and its dispatcher."""
