"""The budget check: token counters (exact offline tiktoken, calibrated approximation), the
per-message count cache, the incremental estimate, the ``ctx_budget`` node (docs/design.md §5)."""

from ctx_langgraph.budget.counters import (
    ApproximateCounter,
    CountCache,
    TiktokenCounter,
    TokenCounter,
    default_counter,
    encoding_for_model,
    ensure_offline_encodings,
)
from ctx_langgraph.budget.estimate import BudgetEstimate, estimate_next_request
from ctx_langgraph.budget.node import BudgetNode, make_budget_node, make_budget_router
from ctx_langgraph.providers.count import (
    AnthropicCountHook,
    OpenAIResponsesCountHook,
    ProviderCountHook,
)

__all__ = [
    "AnthropicCountHook",
    "ApproximateCounter",
    "BudgetEstimate",
    "BudgetNode",
    "CountCache",
    "OpenAIResponsesCountHook",
    "ProviderCountHook",
    "TiktokenCounter",
    "TokenCounter",
    "default_counter",
    "encoding_for_model",
    "ensure_offline_encodings",
    "estimate_next_request",
    "make_budget_node",
    "make_budget_router",
]
