"""One exception out of a group: what pride raises where a nursery it opened reports a group."""

from __future__ import annotations

import logging

import pytest
import trio

from pride.actors.nursery import PrivateNursery
from pride.errors import one_exception

log = logging.getLogger("pride.test")


def _cancelled() -> trio.Cancelled:
    # trio makes Cancelled only inside a cancelled scope; catch a real one.
    caught: list[trio.Cancelled] = []

    async def main() -> None:
        with trio.CancelScope() as scope:
            scope.cancel()
            try:
                await trio.lowlevel.checkpoint()
            except trio.Cancelled as exc:
                caught.append(exc)
                raise

    trio.run(main)
    return caught[0]


def test_the_first_leaf_that_is_not_cancelled_wins_and_the_others_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = ValueError("first"), KeyError("second")
    nested = BaseExceptionGroup("outer", [_cancelled(), ExceptionGroup("inner", [first, second])])
    with caplog.at_level(logging.ERROR, logger="pride.test"):
        assert one_exception(nested, log, "while testing") is first
    assert [r.getMessage() for r in caplog.records] == [
        "another error while testing: KeyError('second')"
    ]
    assert caplog.records[0].exc_info is not None  # with its traceback


def test_a_group_of_cancellations_stands_for_a_cancellation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    one, two = _cancelled(), _cancelled()
    with caplog.at_level(logging.ERROR):
        assert one_exception(BaseExceptionGroup("g", [one, two]), log, "leaving") is one
    assert caplog.records == []  # a Cancelled is the scope's, never an error to report


async def test_a_private_nursery_raises_one_exception_with_its_own_cause() -> None:
    """A child failing inside nested nurseries (its sibling cancelled by it): the caller of
    ``async with`` gets that one error with its own cause, not a group."""
    cause = OSError("disk")

    async def serve(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)  # cancelled by the failure: a Cancelled leaf
            task_status.started()
            await trio.testing.wait_all_tasks_blocked()
            raise RuntimeError("serving failed") from cause

    private = PrivateNursery()
    await private.open(serve)
    with pytest.raises(RuntimeError, match="serving failed") as raised:
        await private.close((None, None, None))
    assert raised.value.__cause__ is cause
