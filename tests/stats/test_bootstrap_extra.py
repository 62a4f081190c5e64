"""Prompt sensitivity when a leave-one-prompt-out refit has no finite estimate."""

import pandas as pd

from stats.bootstrap import prompt_sensitivity


def test_top_is_nan_for_a_failed_refit_and_the_top_is_then_not_stable():
    # System "c" appears only on prompt p2: leaving p2 out leaves no estimate for it.
    rows = [
        ("a", "b", "a", "p1"),
        ("b", "a", "a", "p1"),
        ("a", "b", "b", "p1"),
        ("a", "c", "a", "p2"),
        ("c", "b", "a", "p2"),
        ("a", "c", "b", "p2"),
        ("a", "b", "a", "p3"),
        ("b", "a", "b", "p3"),
    ]
    ballots = pd.DataFrame(rows, columns=["a", "b", "outcome", "prompt"])
    sensitivity = prompt_sensitivity(ballots)
    assert "p2" in sensitivity.failed
    top = sensitivity.top
    failed = set(sensitivity.failed)
    assert all(pd.isna(top[p]) for p in failed)
    assert all(isinstance(top[p], str) for p in top.index if p not in failed)
    assert sensitivity.top_is_stable() is False
