"""duel.intervals: the one interval arithmetic behind detectors, watch coverage and proofs."""

import pytest

from duel.intervals import clip_intervals, clipped_length, interval_union, total_length


@pytest.mark.parametrize(
    "intervals, union",
    [
        ([], []),
        ([(3, 4), (1, 2)], [(1.0, 2.0), (3.0, 4.0)]),
        ([(1, 2), (2, 3)], [(1.0, 3.0)]),  # touching intervals merge
        ([(1, 5), (2, 3)], [(1.0, 5.0)]),  # contained
        ([(2, 2), (3, 1)], []),  # empty and reversed intervals vanish
    ],
)
def test_union(intervals, union):
    assert interval_union(intervals) == union


def test_watching_a_part_twice_adds_nothing_and_clipping_bounds_the_film():
    watched = [(0, 10), (5, 12), (11, 20)]
    assert total_length(watched) == 20
    assert clipped_length(watched, 0, 15) == 15
    assert clipped_length([(-1, 2), (58, 61)], 0, 60) == 4
    assert clip_intervals([(-1, 2), (70, 80)], 0, 60) == [(0, 2)]
