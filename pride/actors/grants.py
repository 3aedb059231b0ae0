"""Capability grants on a branch: the structured outputs it may emit (ADR-0016 D3).

``branch.grant_capabilities(operable)`` and ``branch.revoke_capabilities()``,
bound onto [`Branch`][pride.actors.branch.Branch] as its methods. A grant is
observation only: recorded assistant messages are read for fenced JSON using
the granted keys (`pride.actors.wiring` emits the signals); nothing is
executed. The grant may also be described in the system prompt, between
balanced markers a later grant or a revoke replaces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..context import CapabilityGrant
from ..context.capabilities import apply_block

if TYPE_CHECKING:
    from .branch import Branch

__all__ = ["grant_capabilities", "revoke_capabilities"]


def grant_capabilities(branch: Branch, operable: type, *, prompt: bool = True) -> CapabilityGrant:
    """Grant the structured outputs ``operable``'s fields describe (ADR-0016 D3).

    From now on every recorded assistant message is observed: fenced JSON
    blocks using granted keys become ``StructuredOutput`` (valid),
    ``EmissionRejected`` (invalid) or ``CapabilityViolation`` (mixed with
    other keys) signals. Observation only: nothing is executed.

    Args:
        operable: an attrs class, a dataclass or a pydantic model class;
            its field names are the granted keys.
        prompt: also describe the grant in the system prompt, between
            ``CAP_BEGIN``/``CAP_END`` markers, replacing a previous
            balanced block (a system message is created if there is none).
            False installs only the runtime grant.

    Returns:
        the installed grant.

    Raises:
        TypeError: ``operable`` is not one of those classes.
    """
    grant = CapabilityGrant.from_operable(operable)
    branch._capabilities = grant
    if prompt:
        branch._messages.set_system(apply_block(branch.system, grant.render_prompt()))
    return grant


def revoke_capabilities(branch: Branch) -> None:
    """Clear the grant and remove a balanced capability block from the system prompt."""
    branch._capabilities = None
    branch._messages.set_system(apply_block(branch.system, None))
