"""One client connection: initialize, the auth gate, routing, the session lifecycle, bookkeeping, warm-up."""
