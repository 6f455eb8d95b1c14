"""The budget check: token counters (exact offline tiktoken, calibrated approximation) and the
per-message count cache (DESIGN section 5)."""

from ctx_langgraph.budget.counters import (
    ApproximateCounter,
    CountCache,
    TiktokenCounter,
    TokenCounter,
    encoding_for_model,
    ensure_offline_encodings,
)

__all__ = [
    "ApproximateCounter",
    "CountCache",
    "TiktokenCounter",
    "TokenCounter",
    "encoding_for_model",
    "ensure_offline_encodings",
]
