"""Restart strategies and intensity: which children restart, and when a supervisor gives up."""

from __future__ import annotations

import pytest

from pride.supervisors.strategy import (
    RestartIntensity,
    check_restart_type,
    check_strategy,
    restart_group,
    restarts_after_crash,
)


class TestRestartGroup:
    """restart_group picks the children a crash stops and starts again, in start order."""

    def test_one_for_one_restarts_only_the_crashed_child(self) -> None:
        """one_for_one: just the crashed child."""
        assert restart_group("one_for_one", ["a", "b", "c"], "b") == ["b"]

    def test_one_for_all_restarts_everyone(self) -> None:
        """one_for_all: every running child, in start order."""
        assert restart_group("one_for_all", ["a", "b", "c"], "b") == ["a", "b", "c"]

    def test_rest_for_one_restarts_the_crashed_child_and_later_ones(self) -> None:
        """rest_for_one: the crashed child and those started after it."""
        assert restart_group("rest_for_one", ["a", "b", "c"], "b") == ["b", "c"]
        assert restart_group("rest_for_one", ["a", "b", "c"], "c") == ["c"]


class TestRestartTypes:
    """Only temporary children are never restarted."""

    def test_restart_types(self) -> None:
        """permanent and transient restart after a crash; temporary does not."""
        assert restarts_after_crash("permanent")
        assert restarts_after_crash("transient")
        assert not restarts_after_crash("temporary")

    def test_unknown_names_are_rejected(self) -> None:
        """A misspelt strategy or restart type is a ValueError naming the choices."""
        with pytest.raises(ValueError, match="one_for_one"):
            check_strategy("one-for-one")
        with pytest.raises(ValueError, match="temporary"):
            check_restart_type("sometimes")


class TestRestartIntensity:
    """At most max_restarts restart events per sliding period."""

    def test_the_event_past_the_limit_is_refused(self) -> None:
        """Three restarts within the window pass; the fourth is refused and not counted."""
        intensity = RestartIntensity(3, 5.0)
        assert [intensity.allow(t) for t in (0.0, 1.0, 2.0)] == [True, True, True]
        assert not intensity.allow(3.0)
        assert intensity.total == 3

    def test_old_events_leave_the_window(self) -> None:
        """Events older than the period no longer count."""
        intensity = RestartIntensity(1, 5.0)
        assert intensity.allow(0.0)
        assert not intensity.allow(4.9)
        assert intensity.allow(5.0)

    def test_zero_means_no_restart_at_all(self) -> None:
        """max_restarts=0 refuses the first event."""
        assert not RestartIntensity(0, 5.0).allow(0.0)

    def test_reset_forgets_the_window_but_keeps_the_total(self) -> None:
        """A supervisor starting afresh gets a full budget; the lifetime count stays."""
        intensity = RestartIntensity(1, 5.0)
        intensity.allow(0.0)
        intensity.reset()
        assert intensity.allow(1.0)
        assert intensity.total == 2

    @pytest.mark.parametrize(("count", "period"), [(-1, 5.0), (True, 5.0), (1, 0.0), (1, -2)])
    def test_bad_limits_are_rejected(self, count: object, period: object) -> None:
        """A negative count or a non-positive period is a ValueError."""
        with pytest.raises(ValueError):
            RestartIntensity(count, period)  # type: ignore[arg-type]
