"""The decision rules of SPEC.md §8 on crafted score sequences: every rule, every edge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.compression.rules import (
    Decision,
    RuleParams,
    StreamItem,
    decide,
    freeze_before_holds,
    long_term_due,
    mark_runs,
    window_ratios,
)

K, C, F, H, P = (Decision.keep, Decision.candidate, Decision.frozen, Decision.hold,
                 Decision.protected)
X = Decision.compress
LOW, MID, HIGH = 0.1, 0.5, 0.95


def items(*scores: float) -> list[StreamItem]:
    return [StreamItem(score=s) for s in scores]


def runs(*scores: float, run_length: int = 3) -> list[Decision]:
    return mark_runs(items(*scores), low=0.4, high=0.9, run_length=run_length)


def plan(stream: list[StreamItem], *, pressure: float = 1.0, force: bool = False,
         **params: float) -> list[Decision]:
    return decide(stream, RuleParams(**params), pressure=pressure,  # type: ignore[arg-type]
                  force=force).decisions


class TestRuns:
    def test_three_consecutive_low_scores_become_candidates(self) -> None:
        assert runs(LOW, LOW, LOW) == [C, C, C]

    def test_two_are_not_enough(self) -> None:
        assert runs(LOW, LOW, MID, LOW, LOW) == [K, K, K, K, K]

    def test_a_longer_run_is_candidate_throughout(self) -> None:
        assert runs(MID, LOW, LOW, LOW, LOW, LOW, MID) == [K, C, C, C, C, C, K]

    def test_a_run_at_the_end_of_the_stream_counts(self) -> None:
        assert runs(MID, LOW, LOW, LOW) == [K, C, C, C]

    def test_the_low_threshold_is_strict(self) -> None:
        assert runs(0.4, 0.4, 0.4) == [K, K, K]
        assert runs(0.3999, 0.3999, 0.3999) == [C, C, C]

    def test_run_length_is_a_parameter(self) -> None:
        assert runs(LOW, MID, LOW, LOW, run_length=1) == [C, K, C, C]

    def test_empty_stream(self) -> None:
        assert runs() == []
        result = decide([], RuleParams(), pressure=1.0)
        assert result.decisions == [] and result.candidate_ratio == 0.0

    def test_a_memory_that_may_not_be_compressed_breaks_the_run(self) -> None:
        stream = [StreamItem(LOW), StreamItem(LOW), StreamItem(LOW, eligible=False),
                  StreamItem(LOW), StreamItem(LOW)]
        assert mark_runs(stream, low=0.4, high=0.9, run_length=3) == [K, K, P, K, K]

    def test_ineligible_memories_keep_their_label(self) -> None:
        stream = [StreamItem(LOW, eligible=False, ineligible_as=Decision.restored),
                  StreamItem(MID, eligible=False, ineligible_as=Decision.hold)]
        assert mark_runs(stream, low=0.4, high=0.9, run_length=3) == [
            Decision.restored, Decision.hold]

    def test_the_keep_signal_breaks_the_run(self) -> None:
        stream = [StreamItem(LOW), StreamItem(LOW), StreamItem(LOW, keep=True),
                  StreamItem(LOW), StreamItem(LOW)]
        assert mark_runs(stream, low=0.4, high=0.9, run_length=3) == [K, K, K, K, K]


class TestEmergencyHold:
    def test_a_high_score_is_held_and_freezes_the_candidates_before_it(self) -> None:
        assert plan(items(LOW, LOW, LOW, HIGH), pressure=0.0) == [F, F, F, H]

    def test_only_candidates_within_its_window_freeze(self) -> None:
        stream = items(LOW, LOW, LOW, LOW, LOW, MID, MID, HIGH)
        decisions = freeze_before_holds(
            stream, mark_runs(stream, low=0.4, high=0.9, run_length=3), high=0.9,
            window_size=4)
        assert decisions == [C, C, C, F, F, K, K, H]

    def test_candidates_after_the_hold_are_not_frozen(self) -> None:
        assert runs(HIGH, LOW, LOW, LOW) == [H, C, C, C]
        assert plan(items(HIGH, LOW, LOW, LOW), pressure=0.0) == [H, C, C, C]

    def test_the_high_threshold_is_strict(self) -> None:
        assert plan(items(LOW, LOW, LOW, 0.9), pressure=0.0) == [C, C, C, K]

    def test_a_held_run_is_never_compressed_even_when_triggered(self) -> None:
        assert plan(items(LOW, LOW, LOW, LOW, HIGH), pressure=5.0) == [F, F, F, F, H]

    def test_a_protected_memory_with_a_high_score_also_freezes(self) -> None:
        stream = [*items(LOW, LOW, LOW), StreamItem(HIGH, eligible=False)]
        assert plan(stream, pressure=0.0) == [F, F, F, P]

    def test_a_hold_ends_a_run_in_progress(self) -> None:
        assert runs(LOW, LOW, HIGH, LOW) == [K, K, H, K]


class TestWindowTrigger:
    def test_triggers_over_the_ratio_with_pressure(self) -> None:
        # 4 of 5 candidates (0.8 > 0.6) and pressure at the alarm level.
        assert plan(items(MID, LOW, LOW, LOW, LOW), pressure=0.7, window_size=5) == [
            K, X, X, X, X]

    def test_the_ratio_must_be_exceeded_not_reached(self) -> None:
        # 3 of 5 = 0.6: not above 0.6.
        assert plan(items(MID, MID, LOW, LOW, LOW), window_size=5) == [K, K, C, C, C]

    def test_no_trigger_below_the_pressure_alarm(self) -> None:
        assert plan(items(LOW, LOW, LOW, LOW), pressure=0.69) == [C, C, C, C]

    def test_force_skips_the_pressure_check_only(self) -> None:
        forced = decide(items(LOW, LOW, LOW, LOW), RuleParams(), pressure=0.1, force=True)
        assert forced.decisions == [X, X, X, X] and forced.forced
        below_ratio = decide(items(MID, MID, LOW, LOW, LOW), RuleParams(window_size=5),
                             pressure=0.1, force=True)
        assert below_ratio.decisions == [K, K, C, C, C] and not below_ratio.forced
        alarmed = decide(items(LOW, LOW, LOW), RuleParams(), pressure=0.9, force=True)
        assert not alarmed.forced  # it would have triggered anyway

    def test_only_candidates_inside_a_triggered_window_are_compressed(self) -> None:
        stream = items(LOW, LOW, LOW, LOW, LOW, MID, MID, MID, MID, MID, LOW, LOW, LOW)
        result = decide(stream, RuleParams(window_size=5), pressure=1.0)
        assert result.decisions == [X, X, X, X, X, K, K, K, K, K, C, C, C]
        assert result.windows == [(0, 5), (1, 6)]  # [C C C C K] is 0.8 too

    def test_a_stream_shorter_than_the_window_is_one_window(self) -> None:
        assert window_ratios([C, C, K], 20) == [(0, 3, 2 / 3)]
        assert plan(items(LOW, LOW, LOW, MID), window_size=20) == [X, X, X, K]

    def test_windows_slide_one_memory_at_a_time(self) -> None:
        ratios = window_ratios([C, C, C, K, K, C], 3)
        assert [(s, e) for s, e, _ in ratios] == [(0, 3), (1, 4), (2, 5), (3, 6)]
        assert [round(r, 3) for _, _, r in ratios] == [1.0, 0.667, 0.333, 0.333]

    def test_frozen_memories_do_not_count_as_candidates(self) -> None:
        result = decide(items(LOW, LOW, LOW, HIGH, MID), RuleParams(window_size=5),
                        pressure=1.0)
        assert result.decisions == [F, F, F, H, K]
        assert result.max_window_ratio == 0.0 and result.windows == []

    def test_reported_ratios(self) -> None:
        result = decide(items(LOW, LOW, LOW, MID, MID, MID, MID, MID), RuleParams(window_size=4),
                        pressure=0.0)
        assert result.candidate_ratio == 3 / 8
        assert result.max_window_ratio == 0.75
        assert result.pressure == 0.0 and not result.pressure_alarm


class TestAge:
    NOW = datetime(2025, 6, 1, tzinfo=UTC)

    def test_older_than_thirty_days_is_due(self) -> None:
        assert long_term_due(self.NOW - timedelta(days=31), self.NOW, age_days=30)

    def test_younger_or_exactly_thirty_days_is_not(self) -> None:
        assert not long_term_due(self.NOW - timedelta(days=29), self.NOW, age_days=30)
        assert not long_term_due(self.NOW - timedelta(days=30), self.NOW, age_days=30)

    def test_a_memory_without_a_time_is_never_due(self) -> None:
        assert not long_term_due(None, self.NOW, age_days=30)


class TestAgeCompression:
    def test_old_low_memories_are_compressed_without_pressure_or_runs(self) -> None:
        old = [StreamItem(score=s, old=True) for s in (LOW, MID, LOW)]
        stream = [*old, *items(LOW, MID)]
        result = decide(stream, RuleParams(), pressure=0.0)
        assert result.decisions == [X, K, X, K, K] and result.aged == [0, 2]
        assert not result.forced and not result.windows

    def test_not_what_is_frozen_protected_or_kept_by_the_policy(self) -> None:
        stream = [StreamItem(score=LOW, old=True), StreamItem(score=LOW, old=True),
                  StreamItem(score=LOW, old=True),
                  StreamItem(score=LOW, old=True, eligible=False),
                  StreamItem(score=LOW, old=True, keep=True), StreamItem(score=HIGH)]
        result = decide(stream, RuleParams(), pressure=0.0)
        assert result.decisions == [F, F, F, P, K, H] and result.aged == []
