"""Context providers at the start of a turn (ADR-0016 D3, ADR-0018 D3).

Every model-calling operation calls `gather_context` before compiling
its first request. Providers run once per top-level turn; their blocks are
held by the turn context (``provider_blocks``) and injected into that turn's
requests only, and their report becomes ``branch.last_context_report`` when
the turn finalises.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..messages import Instruction

if TYPE_CHECKING:
    from ..actors.branch import Branch
    from ..actors.turn import TurnScope

__all__ = ["gather_context", "writeback_context"]


async def gather_context(branch: Branch, scope: TurnScope | None, instruction: Instruction) -> None:
    """Run the branch's context providers for this turn, once.

    No registered providers: nothing happens (the report stays None). No
    system message: providers are not invoked; the report lists every
    provider under ``skipped``. Otherwise the registry's report and blocks
    are stored on the turn context.
    """
    registry = branch._providers
    if not registry or scope is None or scope.context.provider_report is not None:
        return
    if branch.system is None:
        scope.context.provider_report = registry.skipped_report()
        return
    report = await registry.gather(branch, instruction)
    scope.context.provider_report = report
    scope.context.provider_blocks = tuple(report.blocks)


async def writeback_context(branch: Branch, action_responses: list[object]) -> None:
    """After actions produced responses, let providers persist what they learned."""
    registry = branch._providers
    if registry and any(response is not None for response in action_responses):
        await registry.gather_writeback(branch, action_responses)
