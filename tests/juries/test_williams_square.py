"""Williams designs: Latin-square and carry-over balance for n = 2..12, and the assignment of
jurors to sequences (juries/schedules.py). Pure: no database."""

from __future__ import annotations

from itertools import permutations

import pytest

from juries.schedules import (
    assign_sequences,
    carryover_counts,
    design_rows,
    exposure,
    is_carryover_balanced,
    is_latin,
    order_imbalance_bound,
    plan_viewing_orders,
    position_counts,
    seeded_rng,
    williams_square,
)

SIZES = range(2, 13)


@pytest.mark.parametrize("n", SIZES)
def test_every_row_is_a_sequence_of_all_treatments(n):
    square = williams_square(n)
    assert len(square) == (n if n % 2 == 0 else 2 * n)
    for row in square:
        assert sorted(row) == list(range(n))


@pytest.mark.parametrize("n", SIZES)
def test_each_treatment_appears_equally_often_in_each_position(n):
    square = williams_square(n)
    counts = position_counts(square)
    per_cell = 1 if n % 2 == 0 else 2
    assert all(counts[(t, p)] == per_cell for t in range(n) for p in range(n))
    assert is_latin(square, n)
    # Each n-row half of an odd design is itself a Latin square.
    for half in (square[:n], square[n:]) if n % 2 else (square,):
        assert all(sorted(col) == list(range(n)) for col in zip(*half, strict=True))


@pytest.mark.parametrize("n", SIZES)
def test_each_ordered_pair_is_adjacent_equally_often(n):
    square = williams_square(n)
    counts = carryover_counts(square)
    per_pair = 1 if n % 2 == 0 else 2
    assert set(counts) == set(permutations(range(n), 2))
    assert all(value == per_pair for value in counts.values())
    assert is_carryover_balanced(square, n)


@pytest.mark.parametrize("n", [3, 5, 7])
def test_a_single_square_cannot_balance_carry_over_for_odd_n(n):
    # Why odd n needs the pair of squares: the first n rows alone are unbalanced.
    assert not is_carryover_balanced(williams_square(n)[:n], n)


def test_checks_reject_designs_that_break_the_properties():
    assert not is_latin([[0, 1, 2], [0, 2, 1], [1, 0, 2]], 3)
    assert not is_latin([[0, 1], [0, 1]], 2)
    cyclic = [[(t + r) % 4 for t in range(4)] for r in range(4)]
    assert is_latin(cyclic, 4) and not is_carryover_balanced(cyclic, 4)


def test_degenerate_sizes():
    assert williams_square(1) == [[0]]
    with pytest.raises(ValueError):
        williams_square(0)


@pytest.mark.parametrize("n", SIZES)
def test_a_jury_of_a_multiple_of_the_rows_is_exactly_balanced(n):
    items = [f"S{i}" for i in range(n)]
    jurors = [f"J{i}" for i in range(2 * design_rows(n))]
    assignment = assign_sequences(jurors, items, rng=seeded_rng(f"jury-{n}"))
    assert assignment.balanced
    orders = {j: assignment.order_for(j) for j in jurors}
    report = exposure(orders)
    assert len(set(report.positions.values())) == 1
    assert len(set(report.adjacent.values())) == 1
    assert len(report.adjacent) == n * (n - 1)
    # Every juror sees every film: every pair has the whole jury's complete-view exposure.
    assert set(report.pair_complete_views.values()) == {len(jurors)}


@pytest.mark.parametrize("n,m", [(4, 3), (4, 6), (5, 7), (6, 4), (7, 9), (12, 5)])
def test_an_unbalanced_jury_stays_within_the_stated_bound(n, m):
    items = [f"S{i}" for i in range(n)]
    jurors = [f"J{i}" for i in range(m)]
    assignment = assign_sequences(jurors, items, rng=seeded_rng("x"))
    assert not assignment.balanced
    report = exposure({j: assignment.order_for(j) for j in jurors})
    bound = order_imbalance_bound(m, n)
    assert bound == (1 if n % 2 == 0 else 2)
    positions = [report.positions.get((i, p), 0) for i in items for p in range(n)]
    adjacent = [report.adjacent.get((a, b), 0) for a in items for b in items if a != b]
    assert max(positions) - min(positions) <= bound
    assert max(adjacent) - min(adjacent) <= bound
    assert set(report.pair_complete_views.values()) == {m}


def test_the_treatment_mapping_is_randomized_per_jury_and_reproducible_from_its_seed():
    items = [f"S{i}" for i in range(6)]
    jurors = [f"J{i}" for i in range(6)]
    mappings = {assign_sequences(jurors, items, rng=seeded_rng(s)).treatments for s in "abcdef"}
    assert len(mappings) > 1
    one = assign_sequences(jurors, items, rng=seeded_rng("a"))
    again = assign_sequences(jurors, items, rng=seeded_rng("a"))
    assert one.treatments == again.treatments and one.rows == again.rows


def test_viewing_plan_balances_every_prompt_and_gives_each_juror_a_different_order():
    blocks = {"P1": ["a1", "b1", "c1", "d1"], "P2": ["a2", "b2", "c2", "d2"]}
    jurors = [f"J{i}" for i in range(8)]
    plan = plan_viewing_orders(jurors, blocks, seed="round-7|craft")
    assert plan.balanced
    for juror in jurors:
        order = plan.orders[juror]
        assert sorted(item for _, item in order) == sorted(blocks["P1"] + blocks["P2"])
        # A prompt's films are watched together, in one block.
        assert [b for b, _ in order] in (["P1"] * 4 + ["P2"] * 4, ["P2"] * 4 + ["P1"] * 4)
    for key in blocks:
        per_juror = {j: [i for b, i in plan.orders[j] if b == key] for j in jurors}
        report = exposure(per_juror)
        assert len(set(report.positions.values())) == 1
        assert len(set(report.adjacent.values())) == 1
    # Block order is counterbalanced too: half the jurors start with each prompt.
    firsts = [plan.orders[j][0][0] for j in jurors]
    assert firsts.count("P1") == firsts.count("P2") == 4
    assert plan_viewing_orders(jurors, blocks, seed="round-7|craft").orders == plan.orders
    assert plan_viewing_orders(jurors, blocks, seed="other").orders != plan.orders


def test_three_reviewers_get_three_different_orders_in_every_task():
    # Tovaki: reviewer-specific order inside each task.
    blocks = {f"T{t}": [f"{t}-{x}" for x in "ABCD"] for t in range(6)}
    plan = plan_viewing_orders(["R1", "R2", "R3"], blocks, seed="tovaki")
    for key in blocks:
        orders = {tuple(i for b, i in plan.orders[r] if b == key) for r in ("R1", "R2", "R3")}
        assert len(orders) == 3
