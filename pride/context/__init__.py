"""Context for a branch's turns: ephemeral provider blocks and capability grants.

* [`ContextProviderRegistry`][pride.ContextProviderRegistry] (``branch.providers``) asks registered
  [`ContextProvider`][pride.ContextProvider] objects for text before a turn's first model call
  and injects what fits the token budget into that turn's requests only; the
  [`ProviderReport`][pride.ProviderReport] becomes ``branch.last_context_report``.
* [`CapabilityGrant`][pride.CapabilityGrant] (``branch.grant_capabilities(operable)``) tells
  the model which structured blocks it may emit and turns what it emits into
  ``StructuredOutput``, ``CapabilityViolation`` or ``EmissionRejected``
  signals.

Neither is serialised with a branch or copied by ``clone``.
This package imports nothing of pride but [`pride.errors`][pride.errors],
[`pride.messages`][pride.branch.branch.Branch.messages] and, for its token counter,
[`pride.llm`][pride.llm].
"""

from ._tokens import CHARS_PER_TOKEN as CHARS_PER_TOKEN, count_tokens as count_tokens
from .capabilities import (
    CAP_BEGIN as CAP_BEGIN,
    CAP_END as CAP_END,
    CapabilityGrant as CapabilityGrant,
)
from .providers import (
    DEFAULT_BUDGET as DEFAULT_BUDGET,
    ContextProvider as ContextProvider,
    ContextProviderRegistry as ContextProviderRegistry,
    ProviderReport as ProviderReport,
)

__all__ = [
    "CAP_BEGIN",
    "CAP_END",
    "CHARS_PER_TOKEN",
    "DEFAULT_BUDGET",
    "CapabilityGrant",
    "ContextProvider",
    "ContextProviderRegistry",
    "ProviderReport",
    "count_tokens",
]
