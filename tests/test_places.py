"""Tests for ``pride._places``: the one bounded wait under the front doors' places
(``pride serve``'s turns and event streams, ``pride mcp``'s calls and GET streams).

The doors' own tests drive it through real servers; these pin its edges, each
hard to reach through a door: a wait of 0, a waiter cancelled at each of its
awaits, a refusal that must leave the figure as it was, a place given back twice.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from pride._places import Places


async def test_a_wait_of_0_takes_a_free_place_and_refuses_only_when_none_is() -> None:
    """A ``wait`` of 0 takes a free place at once and refuses only when none is free."""
    places = Places(1, 0)
    assert await places.take()
    assert places.taken == 1
    assert not await places.take()  # refused: the figure is as it was
    assert places.taken == 1
    places.give_back()
    assert places.taken == 0


async def test_a_take_that_finds_a_free_place_under_a_cancel_still_holds_it_once() -> None:
    """Cancelled as it takes a free place, `take` either holds it (True) or not (the
    Cancelled): never a place held that nobody was told of."""
    places = Places(1, 5)
    with trio.CancelScope() as scope:
        scope.cancel()
        taken = await places.take()  # the place is free: taken, the cancel comes later
    assert taken and places.taken == 1
    places.give_back()
    assert places.taken == 0


async def test_a_waiter_cancelled_while_it_waits_holds_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A waiter cancelled while it waits holds nothing, and the place goes to the next taker."""
    places = Places(1, 30)
    assert await places.take()
    outcome: list[bool] = []
    async with trio.open_nursery() as nursery:

        async def wait() -> None:
            outcome.append(await places.take())

        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert outcome == []
    places.give_back()
    assert places.taken == 0
    assert await places.take()  # the place came back, not to the gone waiter


async def test_a_refused_wait_leaves_the_figure_as_it_was(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A take refused after its ``wait`` leaves `taken` as it was."""
    places = Places(2, 1.0)
    assert await places.take() and await places.take()
    start = trio.current_time()
    assert not await places.take()
    assert trio.current_time() - start == pytest.approx(1.0)
    assert places.taken == 2
    places.give_back()
    places.give_back()
    assert places.taken == 0


async def test_a_place_given_back_wakes_the_waiter_which_then_holds_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A place given back goes to the waiter, which then holds it."""
    places = Places(1, 30)
    assert await places.take()
    outcome: list[bool] = []
    async with trio.open_nursery() as nursery:

        async def wait() -> None:
            outcome.append(await places.take())

        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        places.give_back()
    assert outcome == [True]
    assert places.taken == 1


async def test_a_place_given_back_twice_is_refused_naming_it() -> None:
    """Given back twice, the place would let ``limit + 1`` in and make `taken` lie."""
    places = Places(1, 0)
    assert await places.take()
    places.give_back()
    with pytest.raises(RuntimeError, match="given back that was not taken"):
        places.give_back()
    assert places.taken == 0
    assert await places.take()
    assert not await places.take()


async def test_held_gives_the_place_back_whatever_ends_the_block() -> None:
    """`held` gives its place back when its block fails, and refuses with its error
    when none is free."""
    places = Places(1, 0)
    with pytest.raises(KeyError):
        async with places.held(lambda: ValueError("full")):
            assert places.taken == 1
            raise KeyError("the block failed")
    assert places.taken == 0
    async with places.held(lambda: ValueError("full")):
        with pytest.raises(ValueError, match="full"):
            async with places.held(lambda: ValueError("full")):
                pass  # pragma: no cover - refused before the block
    assert places.taken == 0
