"""Tests for RetryPolicy and Retry-After parsing."""

from __future__ import annotations

import email.utils
import time

import pytest

from pride.errors import (
    AuthenticationFailed,
    BadRequest,
    MalformedResponse,
    ProviderConnectionError,
    ProviderTimeout,
    RateLimited,
    ScriptExhausted,
    ServerError,
)
from pride.llm import RetryPolicy
from pride.llm._errors import parse_retry_after


class TestNextDelay:
    """RetryPolicy.next_delay."""

    def test_backoff_doubles_from_base_delay_and_is_capped(self):
        """Without jitter the delays are 1, 2, 4, ... capped at max_delay."""
        policy = RetryPolicy(max_retries=10, jitter=0, max_delay=5.0, deadline=None)
        error = ServerError("boom")
        delays = [policy.next_delay(n, error, 0.0) for n in range(5)]
        assert delays == [1.0, 2.0, 4.0, 5.0, 5.0]

    def test_jitter_stays_within_its_fraction(self):
        """A 20 % jitter keeps each delay within ±20 % of the computed one."""
        policy = RetryPolicy(jitter=0.2)
        for _ in range(200):
            delay = policy.next_delay(1, ServerError("x"), 0.0)
            assert delay is not None and 1.6 <= delay <= 2.4

    @pytest.mark.parametrize(
        "error",
        [
            RateLimited("x"),
            ServerError("x"),
            ProviderConnectionError("x"),
            ProviderTimeout("x"),
        ],
    )
    def test_retryable_errors_are_retried(self, error):
        """429, 5xx, transport errors and timeouts get another attempt."""
        assert RetryPolicy().next_delay(0, error, 0.0) is not None

    @pytest.mark.parametrize(
        "error",
        [
            AuthenticationFailed("x"),
            BadRequest("x"),
            MalformedResponse("x"),
            ScriptExhausted("x"),
            ValueError("x"),
        ],
    )
    def test_other_errors_are_never_retried(self, error):
        """Other 4xx, unreadable replies and non-provider errors are final."""
        assert RetryPolicy().next_delay(0, error, 0.0) is None

    def test_max_retries_bounds_the_retries(self):
        """After max_retries retries the policy gives up."""
        policy = RetryPolicy(max_retries=2)
        assert policy.next_delay(1, ServerError("x"), 0.0) is not None
        assert policy.next_delay(2, ServerError("x"), 0.0) is None
        assert RetryPolicy.never().next_delay(0, ServerError("x"), 0.0) is None

    def test_retry_after_replaces_the_backoff_even_above_max_delay(self):
        """A provider's Retry-After is honoured as given."""
        policy = RetryPolicy(max_delay=1.0)
        assert policy.next_delay(0, RateLimited("x", retry_after=7.5), 0.0) == 7.5

    def test_deadline_stops_retries_that_would_end_too_late(self):
        """No retry starts if its delay would end past the total deadline."""
        policy = RetryPolicy(deadline=10.0, jitter=0)
        assert policy.next_delay(0, ServerError("x"), 8.0) == 1.0
        assert policy.next_delay(0, ServerError("x"), 9.5) is None
        assert policy.next_delay(0, RateLimited("x", retry_after=30), 0.0) is None

    def test_negative_settings_are_rejected(self):
        """Negative numbers raise ValueError naming the field."""
        with pytest.raises(ValueError, match="base_delay"):
            RetryPolicy(base_delay=-1)


class TestParseRetryAfter:
    """parse_retry_after."""

    def test_seconds(self):
        """A number of seconds is read as is."""
        assert parse_retry_after({"retry-after": "3"}) == 3.0

    def test_milliseconds_header_wins(self):
        """OpenAI's retry-after-ms is preferred when present."""
        assert parse_retry_after({"retry-after-ms": "250", "retry-after": "3"}) == 0.25

    def test_http_date(self):
        """An HTTP date is turned into seconds from now."""
        when = email.utils.formatdate(time.time() + 30, usegmt=True)
        delay = parse_retry_after({"retry-after": when})
        assert delay is not None and 25 <= delay <= 31

    def test_past_dates_and_garbage(self):
        """A past date gives 0; garbage or absence gives None."""
        past = email.utils.formatdate(time.time() - 30, usegmt=True)
        assert parse_retry_after({"retry-after": past}) == 0.0
        assert parse_retry_after({"retry-after": "soon"}) is None
        assert parse_retry_after({}) is None
