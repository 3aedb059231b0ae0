"""Budgets at run time: the accounts usage is counted on, the meter every model and
tool call passes, and the allowance work carries across branches.

The limits themselves ([`Budget`][pride.Budget]) and the usage record
([`Usage`][pride.Usage]) travel (a command's ``budget`` field, ``RunEnd.usage``),
so they are messages (`pride.messages.budget`); this package is what the runtime
does with them: `Account` (a branch's or a session's usage against its budget),
`Meter` (one turn's), and `drawing_on` (a flow's budget, carried by the work it
sends).
"""

from .accounts import Account, Meter
from .allowance import carried_allowance, carry, drawing_on, uncarry

__all__ = ["Account", "Meter", "carried_allowance", "carry", "drawing_on", "uncarry"]
