"""The storage core below every store: statements, dialects, codec, one runner with its SQLite
and PostgreSQL backends, and the numbered migrations composed from each domain's tables."""
