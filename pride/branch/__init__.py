"""The Branch aggregate: one conversation's state and its facade verbs, one class.

`Branch` owns the five managers (messages, actions, models, logs, operations)
and is both the state and the facade: ``await branch.chat(...)`` is
``ask(branch, Chat(...))``. The actor that serves it, the send API and the turn
driver are `pride.actors`, which knows this class only by the protocols it
declares (`pride.actors.actor.ServedBranch`).
"""

from .branch import DEFAULT_MAILBOX_SIZE, Branch, live_branch

__all__ = ["DEFAULT_MAILBOX_SIZE", "Branch", "live_branch"]
