"""Tests for the rate limiter, alone and through iModel, on trio's MockClock."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from pride.llm import ModelRequest, RateLimiter, ScriptedModel, ScriptedReply, Usage


def _request(text: str) -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": text}])


async def test_250_requests_at_100_per_minute_take_three_windows_in_fifo_order(autojump_clock):
    """250 calls at limit_requests=100 per 60 s are admitted 100/100/50 at t0, t0+60, t0+120."""
    admitted_at: dict[str, float] = {}

    def reply(request: ModelRequest) -> str:
        admitted_at[request.messages[0]["content"]] = trio.current_time()
        return "ok"

    model = ScriptedModel(reply, limit_requests=100, capacity_refresh_time=60.0)
    arrivals: list[str] = []
    start = trio.current_time()

    async def caller(name: str) -> None:
        arrivals.append(name)  # no checkpoint before invoke joins the queue
        await model.invoke(_request(name))

    async with trio.open_nursery() as nursery:
        for i in range(250):
            nursery.start_soon(caller, f"r{i}")

    assert len(arrivals) == 250
    for position, name in enumerate(arrivals):
        assert admitted_at[name] == start + 60.0 * (position // 100), (position, name)
    assert trio.current_time() - start == 120.0
    assert model.statistics().calls == 250


async def test_concurrency_limit_one_serves_callers_strictly_in_arrival_order(autojump_clock):
    """With concurrency_limit=1 the script sees requests exactly in arrival order."""
    model = ScriptedModel(lambda request: "ok", delay=1.0, concurrency_limit=1)
    arrivals: list[str] = []

    async def caller(name: str) -> None:
        arrivals.append(name)
        await model.invoke(_request(name))

    async with trio.open_nursery() as nursery:
        for i in range(20):
            nursery.start_soon(caller, f"r{i}")

    assert [call.messages[0]["content"] for call in model.calls] == arrivals


async def test_concurrency_limit_holds(autojump_clock):
    """No more than concurrency_limit calls run at once, and all finish."""
    running = 0
    peak = 0

    async def reply(request: ModelRequest) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await trio.sleep(1.0)
        running -= 1
        return "done"

    model = ScriptedModel(reply, concurrency_limit=3)
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for i in range(20):
            nursery.start_soon(model.invoke, _request(str(i)))
    assert peak == 3
    assert trio.current_time() - start == 7.0  # ceil(20 / 3) rounds of 1 s
    assert model.statistics().in_flight == 0


async def test_token_limit_spreads_calls_over_windows(autojump_clock):
    """limit_tokens=100 with 50-token calls admits two calls per window."""
    times: list[float] = []

    def reply(request: ModelRequest) -> ScriptedReply:
        times.append(trio.current_time())
        return ScriptedReply(text="ok", usage=Usage(input_tokens=50, output_tokens=0))

    model = ScriptedModel(reply, limit_tokens=100, capacity_refresh_time=60.0)
    async with trio.open_nursery() as nursery:
        for _ in range(6):
            nursery.start_soon(model.invoke, _request("x" * 200))  # 200 chars ~ 50 tokens
    assert sorted(times) == [0.0, 0.0, 60.0, 60.0, 120.0, 120.0]


async def test_actual_usage_above_the_estimate_is_charged_to_the_window(autojump_clock):
    """A reply that used more tokens than estimated pushes the next call to the next window."""
    times: list[float] = []

    def reply(request: ModelRequest) -> ScriptedReply:
        times.append(trio.current_time())
        return ScriptedReply(text="ok", usage=Usage(input_tokens=10, output_tokens=90))

    model = ScriptedModel(reply, limit_tokens=100, concurrency_limit=1)
    await model.invoke(_request("x" * 40))  # estimated 10, actually 100
    await model.invoke(_request("x" * 40))
    assert times == [0.0, 60.0]


async def test_a_request_larger_than_the_token_limit_runs_alone_in_a_fresh_window(
    autojump_clock, caplog
):
    """An oversized request is admitted (with a warning) instead of waiting forever."""
    model = ScriptedModel(lambda request: "ok", limit_tokens=10)
    with caplog.at_level(logging.WARNING, logger="pride.llm"):
        reply = await model.invoke(_request("x" * 400))
    assert reply.text == "ok"
    assert "exceeds limit_tokens=10" in caplog.text


async def test_a_cancelled_waiter_leaves_the_queue_and_the_next_moves_up(autojump_clock):
    """Cancelling a queued call removes it; the caller behind it is admitted in its place."""
    model = ScriptedModel(lambda request: request.messages[0]["content"], limit_requests=1)
    await model.invoke(_request("first"))  # fills the window that ends at t=60
    results: list[str] = []

    async def patient() -> None:
        results.append((await model.invoke(_request("third"))).text)

    async with trio.open_nursery() as nursery:
        with trio.move_on_after(10) as scope:
            nursery.start_soon(patient)
            await model.invoke(_request("second"))
        assert scope.cancelled_caught
        assert model.statistics().queued == 1

    assert results == ["third"]
    assert [c.messages[0]["content"] for c in model.calls] == ["first", "third"]
    assert trio.current_time() == 60.0


async def test_callers_beyond_queue_capacity_wait_for_a_place_and_none_fail(autojump_clock):
    """Over queue_capacity, callers wait (counted as waiting_for_place) and all succeed."""
    limiter = RateLimiter(concurrency_limit=1, queue_capacity=5)
    seen: list[tuple[int, int]] = []

    async def caller() -> None:
        await limiter.acquire()
        try:
            stats = limiter.statistics()
            seen.append((stats.queued, stats.waiting_for_place))
            await trio.sleep(1)
        finally:
            limiter.release()

    async with trio.open_nursery() as nursery:
        for _ in range(20):
            nursery.start_soon(caller)
    assert len(seen) == 20
    assert max(seen) == (5, 14)
    assert seen[-1] == (0, 0)
    assert limiter.statistics().in_flight == 0


async def test_acquire_checkpoints_even_when_admitted_at_once():
    """acquire() is a checkpoint on the fast path too (async functions always checkpoint)."""
    limiter = RateLimiter(limit_requests=10)
    with trio.testing.assert_checkpoints():
        await limiter.acquire()
    limiter.release()


def test_limiter_state_does_not_cross_trio_runs():
    """A window filled in one trio run does not delay the same model in the next run."""
    model = ScriptedModel(limit_requests=1)

    async def one_call() -> float:
        await model.invoke(_request("hi"))
        return trio.current_time()

    first = trio.run(one_call, clock=trio.testing.MockClock(autojump_threshold=0))
    second = trio.run(one_call, clock=trio.testing.MockClock(autojump_threshold=0))
    assert first == second == 0.0


def test_bad_limits_are_rejected():
    """Non-positive limits raise ValueError naming the argument."""
    with pytest.raises(ValueError, match="limit_requests"):
        RateLimiter(limit_requests=0)
    with pytest.raises(ValueError, match="capacity_refresh_time"):
        RateLimiter(capacity_refresh_time=0)
    with pytest.raises(ValueError, match="queue_capacity"):
        RateLimiter(queue_capacity=0)


async def test_a_model_without_limits_has_no_queue(autojump_clock):
    """Without limits, many concurrent calls run at once and nothing is ever queued."""
    model = ScriptedModel(delay=1.0)
    async with trio.open_nursery() as nursery:
        for i in range(50):
            nursery.start_soon(model.invoke, _request(str(i)))
        await trio.sleep(0.5)
        stats = model.statistics()
        assert (stats.in_flight, stats.queued) == (50, 0)
    assert trio.current_time() == 1.0


async def test_a_waiter_the_window_makes_room_for_goes_at_once(autojump_clock):
    """A call whose usage came in under its estimate makes room in the window: the
    caller waiting at the head for that window to end is admitted then, and goes
    then. It was marked admitted (its concurrency slot taken) but kept sleeping to
    the window's end, 60 s later, with nothing else in the way."""
    times: dict[str, float] = {}

    def reply(request: ModelRequest) -> ScriptedReply:
        name = request.messages[0]["content"].split()[0]
        times[name] = trio.current_time()
        return ScriptedReply(text="ok", usage=Usage(input_tokens=5, output_tokens=5))

    model = ScriptedModel(reply, delay=1.0, limit_tokens=100, capacity_refresh_time=60.0)
    first = _request("first " + "word " * 70)  # about 70 to 90 tokens estimated
    second = _request("second " + "word " * 40)  # about 40 to 50: no room beside the first
    async with trio.open_nursery() as nursery:
        nursery.start_soon(model.invoke, first)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(model.invoke, second)
        await trio.testing.wait_all_tasks_blocked()
        assert model.statistics().queued == 1  # the window holds the first's estimate
    # The first's reply (made at t=0, delivered at t=1) used 10 tokens: at t=1 the
    # second fits the window.
    assert times == {"first": 0.0, "second": 1.0}


async def test_a_call_cancelled_while_queued_is_counted_unsent(autojump_clock):
    """A call that leaves the limiter's queue, cancelled, never reached the provider:
    it was counted among ``calls`` and nowhere else, so ``calls - unsent - queued -
    in_flight`` overstated the calls the provider ran."""
    model = ScriptedModel(["first", "second"], limit_requests=1, capacity_refresh_time=60.0)
    await model.invoke(_request("a"))  # the window's one request
    with trio.move_on_after(1.0):
        await model.invoke(_request("b"))  # waits for the next window: cancelled
    stats = model.statistics()
    assert (stats.calls, stats.unsent, stats.queued, stats.in_flight) == (2, 1, 0, 0)
    assert stats.failures == 0  # cancelled, not failed
