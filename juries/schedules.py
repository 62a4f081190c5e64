"""Viewing orders and screening schedules for full-film juries. Pure Python, no Django.

Protocol, "Five-minute and longer evaluation": "Randomize the viewing order for each juror.
Counterbalance order with a Latin-square schedule. Give every system pair equal complete-view
exposure. ... Use separate sessions for 120-minute entries. Set fixed breaks and a maximum
daily screening time." Tovaki ``controls``: task-local anonymous labels and a
reviewer-specific order.

The counterbalancing design is the Williams square: a Latin square (rows are viewing
sequences, columns are positions, every treatment once in each position) whose rows also
balance first-order carry-over (every ordered pair of distinct treatments is adjacent equally
often). For an even number of treatments one square of ``n`` rows does both; for an odd number
no single square can, and the pair of squares (the square and its mirror image, ``2n`` rows)
does. Jurors are dealt to rows in a seeded random order, and which system gets which treatment
number is drawn afresh for each jury, so the published design is reproducible from its seed
and still unpredictable before it is drawn.

Exposure: every juror is assigned every film of the round, so every system pair is seen in
full by every juror who completes the schedule: complete-view exposure is equal for all
pairs by construction. What the number of jurors governs is order balance: when it is a
multiple of the square's rows, positions and ordered adjacencies are exactly balanced; when it
is not, :func:`order_imbalance_bound` states how far any count can be from any other.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

Square = list[list[int]]


class ScheduleError(ValueError):
    """A schedule that cannot be built under the given rules."""


# ---------------------------------------------------------------------------
# The Williams design


def williams_square(n: int) -> Square:
    """The Williams design for ``n`` treatments ``0..n-1``.

    Rows are sequences (jurors), columns positions. For even ``n``: ``n`` rows, each treatment
    once per position, each ordered pair of distinct treatments adjacent exactly once. For odd
    ``n``: the square and its mirror image, ``2n`` rows, each treatment twice per position and
    each ordered pair adjacent exactly twice. ``n = 1`` is the single sequence ``[0]``.

    Construction: the first row is ``0, 1, n-1, 2, n-2, ...``; row ``r`` adds ``r`` modulo
    ``n``. The first row's successive differences are all distinct modulo ``n`` when ``n`` is
    even, which is what makes every ordered pair appear once.
    """
    if n < 1:
        raise ValueError("a Williams square needs at least one treatment")
    if n == 1:
        return [[0]]
    first = [0]
    low, high = 1, n - 1
    for j in range(1, n):
        if j % 2 == 1:
            first.append(low)
            low += 1
        else:
            first.append(high)
            high -= 1
    square = [[(t + r) % n for t in first] for r in range(n)]
    if n % 2 == 1:
        square += [list(reversed(row)) for row in square]
    return square


def position_counts(rows: Sequence[Sequence[int]]) -> Counter[tuple[int, int]]:
    """How many rows put treatment ``t`` at position ``p``: keys ``(t, p)``."""
    return Counter((t, p) for row in rows for p, t in enumerate(row))


def carryover_counts(rows: Sequence[Sequence[int]]) -> Counter[tuple[int, int]]:
    """How many times treatment ``a`` is immediately followed by ``b``: keys ``(a, b)``."""
    return Counter((row[i], row[i + 1]) for row in rows for i in range(len(row) - 1))


def is_latin(rows: Sequence[Sequence[int]], n: int) -> bool:
    """Every row is a permutation of ``0..n-1`` and every treatment is equally often in each
    position (exactly once per position in each ``n``-row square)."""
    if not rows or any(sorted(row) != list(range(n)) for row in rows):
        return False
    counts = position_counts(rows)
    expected = len(rows) / n
    return all(counts[(t, p)] == expected for t in range(n) for p in range(n))


def is_carryover_balanced(rows: Sequence[Sequence[int]], n: int) -> bool:
    """Every ordered pair of distinct treatments is adjacent equally often (and no treatment
    follows itself)."""
    counts = carryover_counts(rows)
    if any(a == b for a, b in counts):
        return False
    values = [counts[(a, b)] for a in range(n) for b in range(n) if a != b]
    return not values or len(set(values)) == 1


def design_rows(n: int) -> int:
    """Rows of the Williams design for ``n`` treatments: the juror count that balances it."""
    return len(williams_square(n))


def order_imbalance_bound(n_jurors: int, n_treatments: int) -> int:
    """The largest possible difference between two position counts (or two ordered-adjacency
    counts) when ``n_jurors`` are dealt to the rows of the design in turn.

    Zero when ``n_jurors`` is a multiple of the design's rows. Otherwise the incomplete last
    pass through the rows contributes to each count at most what one full pass does, which is
    ``rows / n`` (1 for even ``n``, 2 for odd), and the complete passes contribute equally.
    """
    rows = design_rows(n_treatments)
    if n_treatments <= 1 or n_jurors % rows == 0:
        return 0
    return rows // n_treatments


# ---------------------------------------------------------------------------
# Assigning jurors to sequences


def seeded_rng(seed: str) -> random.Random:
    """A ``random.Random`` seeded from the SHA-256 of ``seed`` (stable across Python builds)."""
    return random.Random(int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big"))


@dataclass(frozen=True)
class SequenceAssignment:
    """Jurors dealt to the rows of one Williams design over ``items``.

    ``treatments[t]`` is the item that plays treatment ``t`` (drawn at random per jury);
    ``rows[juror]`` the row of the square the juror follows.
    """

    square: Square
    treatments: tuple[str, ...]
    rows: Mapping[str, int]

    def order_for(self, juror: str) -> list[str]:
        return [self.treatments[t] for t in self.square[self.rows[juror]]]

    @property
    def balanced(self) -> bool:
        return len(self.rows) % len(self.square) == 0


def assign_sequences(
    jurors: Sequence[str],
    items: Sequence[str],
    *,
    rng: random.Random,
    row_offset: int = 0,
) -> SequenceAssignment:
    """Deal ``jurors`` to the rows of the Williams design over ``items``.

    The treatment numbers are a random permutation of ``items``; jurors (already in a random
    order, see :func:`plan_viewing_orders`) take rows ``row_offset, row_offset + 1, ...``
    modulo the number of rows, so any full pass through the rows is balanced.
    """
    if len(set(items)) != len(items):
        raise ScheduleError("items must be distinct")
    if len(set(jurors)) != len(jurors):
        raise ScheduleError("jurors must be distinct")
    treatments = list(items)
    rng.shuffle(treatments)
    square = williams_square(len(treatments)) if treatments else [[]]
    rows = {juror: (row_offset + i) % len(square) for i, juror in enumerate(jurors)}
    return SequenceAssignment(square=square, treatments=tuple(treatments), rows=rows)


@dataclass(frozen=True)
class ViewingPlan:
    """Every juror's complete viewing order over blocks (prompts or tasks) of items (films).

    ``block_order[juror]`` is the order of the blocks, itself counterbalanced by a Williams
    square over the blocks; ``orders[juror]`` the flat order of ``(block, item)``.
    """

    seed: str
    juror_order: tuple[str, ...]
    block_assignment: SequenceAssignment
    item_assignments: Mapping[str, SequenceAssignment]
    orders: Mapping[str, list[tuple[str, str]]] = field(default_factory=dict)

    def block_order(self, juror: str) -> list[str]:
        return self.block_assignment.order_for(juror)

    @property
    def balanced(self) -> bool:
        return all(a.balanced for a in self.item_assignments.values())


def plan_viewing_orders(
    jurors: Sequence[str], blocks: Mapping[str, Sequence[str]], *, seed: str
) -> ViewingPlan:
    """Counterbalanced, randomized viewing orders for one jury (one panel).

    ``blocks`` maps a block (a prompt, or a Tovaki task) to its items (the films of that
    prompt). Within each block, jurors follow rows of a Williams square over that block's
    items, with its own random treatment mapping and a random starting row, so two jurors get
    different orders in every block while every block stays balanced; blocks are ordered by a
    Williams square over the blocks. Everything is drawn from ``seed``: the same seed, jurors
    and blocks give the same plan.
    """
    rng = seeded_rng(seed)
    juror_order = sorted(jurors)
    rng.shuffle(juror_order)
    block_keys = sorted(blocks)
    block_assignment = assign_sequences(juror_order, block_keys, rng=rng)
    item_assignments: dict[str, SequenceAssignment] = {}
    for key in block_keys:
        items = list(blocks[key])
        offset = rng.randrange(design_rows(len(items))) if items else 0
        item_assignments[key] = assign_sequences(juror_order, items, rng=rng, row_offset=offset)
    orders = {
        juror: [
            (block, item)
            for block in block_assignment.order_for(juror)
            for item in item_assignments[block].order_for(juror)
        ]
        for juror in juror_order
    }
    return ViewingPlan(
        seed=seed,
        juror_order=tuple(juror_order),
        block_assignment=block_assignment,
        item_assignments=item_assignments,
        orders=orders,
    )


@dataclass(frozen=True)
class ExposureReport:
    """What a set of viewing orders gives each system and each pair (for publication)."""

    positions: Mapping[tuple[str, int], int]
    adjacent: Mapping[tuple[str, str], int]
    pair_complete_views: Mapping[tuple[str, str], int]


def exposure(orders: Mapping[str, Sequence[str]]) -> ExposureReport:
    """Counts over jurors' orders of one block: item at position, ordered adjacencies, and the
    number of jurors who view both items of each unordered pair (complete-view exposure)."""
    positions: Counter[tuple[str, int]] = Counter()
    adjacent: Counter[tuple[str, str]] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    for order in orders.values():
        for p, item in enumerate(order):
            positions[(item, p)] += 1
        for a, b in zip(order, order[1:], strict=False):
            adjacent[(a, b)] += 1
        for a, b in combinations(sorted(set(order)), 2):
            pairs[(a, b)] += 1
    return ExposureReport(dict(positions), dict(adjacent), dict(pairs))


# ---------------------------------------------------------------------------
# Sessions: fixed breaks, a session cap, a daily maximum, separate sessions


@dataclass(frozen=True)
class ScheduleRules:
    """The staff's jury plan for one round, in seconds.

    ``session_cap_s``: screening time in one session (a longer film gets a session of its
    own); ``break_s``: the fixed break after each film inside a session;
    ``between_sessions_s``: the gap between two sessions of one day; ``daily_max_s``: the
    maximum screening time in one day; ``separate_sessions``: every film in a session of its
    own (the definition's ``separate_sessions`` for 120-minute entries).
    """

    session_cap_s: float
    break_s: float
    between_sessions_s: float
    daily_max_s: float
    separate_sessions: bool = False

    def __post_init__(self) -> None:
        if self.session_cap_s <= 0 or self.daily_max_s <= 0:
            raise ScheduleError("the session cap and the daily maximum must be positive")
        if self.break_s < 0 or self.between_sessions_s < 0:
            raise ScheduleError("breaks cannot be negative")
        if self.session_cap_s > self.daily_max_s:
            raise ScheduleError("a session cannot be longer than the daily maximum")


@dataclass(frozen=True)
class PlannedFilm:
    key: str
    start_s: float  # offset from the start of the day
    end_s: float


@dataclass(frozen=True)
class PlannedSession:
    """One session: its day (0-based) and its films; times are offsets from the day's start."""

    day: int
    films: tuple[PlannedFilm, ...]
    break_s: float

    @property
    def start_s(self) -> float:
        return self.films[0].start_s

    @property
    def end_s(self) -> float:
        return self.films[-1].end_s

    @property
    def screening_s(self) -> float:
        return sum(f.end_s - f.start_s for f in self.films)


def plan_sessions(films: Sequence[tuple[str, float]], rules: ScheduleRules) -> list[PlannedSession]:
    """Cut one juror's ordered films into sessions and days, keeping the order.

    A session holds films while its screening time stays within ``session_cap_s``, with the
    fixed break after each film; a film longer than the cap, or any film under
    ``separate_sessions``, gets a session of its own. A day holds sessions while its screening
    time stays within ``daily_max_s``. A film longer than the daily maximum cannot be
    scheduled and raises :class:`ScheduleError`.
    """
    sessions: list[PlannedSession] = []
    current: list[PlannedFilm] = []
    current_screen = 0.0
    current_alone = False
    day = 0
    day_clock = 0.0
    day_screen = 0.0

    def close() -> None:
        nonlocal current, current_screen, current_alone
        if current:
            sessions.append(PlannedSession(day=day, films=tuple(current), break_s=rules.break_s))
        current, current_screen, current_alone = [], 0.0, False

    for key, duration in films:
        if duration <= 0:
            raise ScheduleError(f"film {key} has no duration")
        if duration > rules.daily_max_s:
            raise ScheduleError(
                f"film {key} ({duration:.0f} s) is longer than the daily maximum "
                f"({rules.daily_max_s:.0f} s): it cannot be screened"
            )
        alone = rules.separate_sessions or duration > rules.session_cap_s
        if current and (alone or current_alone or current_screen + duration > rules.session_cap_s):
            close()
        if day_screen + duration > rules.daily_max_s:
            close()
            day += 1
            day_clock = 0.0
            day_screen = 0.0
        if current:
            day_clock += rules.break_s
        elif sessions and sessions[-1].day == day:
            day_clock += rules.between_sessions_s
        current.append(PlannedFilm(key=key, start_s=day_clock, end_s=day_clock + duration))
        current_alone = alone
        day_clock += duration
        current_screen += duration
        day_screen += duration
    close()
    return sessions
