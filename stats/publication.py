"""Publication labels, read from the protocol definition's ``publication_levels``.

Protocol, "Publication levels":

- ``Open Record``: one qualified system. ``Head-to-Head``: two qualified systems.
- ``Pilot``: fewer than 100 valid votes. ``Provisional``: 100 votes, five prompts and two
  opponents. ``Ranked``: 300 votes, six prompts, three opponents and 75 voters.
- ``Leader``: stable results with non-overlapping intervals.
- The vote thresholds apply only to the one- and two-minute tracks. A long-form leaderboard
  needs at least three prompts and equal run counts for every system. A one-prompt comparison
  is a challenge result, never a general rank. Every open record says "One prompt, one run,
  no quality rank." An endurance jury publishes its juror count and confidence limits
  directly; small jury results are labelled descriptive ("Five-minute and longer evaluation").

Every number and label text comes from the definition (``PublicationLevels.from_definition``);
requirement keys ``min_<count>`` are matched to the per-system count of the same name, so a new
``min_`` threshold in the definition is enforced without a code change.

How the rules are read here (stated so reviewers can disagree with a sentence, not with code):

- Counts are per system, over the valid ballots of one pool: ``votes`` = ballots the system
  appears in, ``prompts`` / ``opponents`` / ``voters`` = distinct ones among those ballots.
- ``Pilot`` is the floor of a vote-based leaderboard: a system with fewer than 100 votes is a
  Pilot, and so is one with 100 or more votes that misses another Provisional requirement;
  the reasons say which.
- ``Leader``: at most one system, the top one, and only when (1) it is Ranked (long form:
  when the board is a leaderboard and a power analysis supports the winner claim), (2) its
  interval lies strictly above the second system's (no shared point), and (3) it stays on top
  in every leave-one-prompt-out refit ("stable"); a refit that failed counts as unstable.
- The board's own label is its weakest system's label: a board is only as settled as its
  thinnest entry. The Leader is reported separately.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

OPEN_RECORD = "open_record"
HEAD_TO_HEAD = "head_to_head"
PILOT = "pilot"
PROVISIONAL = "provisional"
RANKED = "ranked"
LEADER = "leader"
LEADERBOARD = "leaderboard"  # a result type in the definition (``result_types``)
DESCRIPTIVE = "descriptive"  # protocol: "Label small jury results as descriptive."

# Strength order of the vote-based labels, weakest first.
_VOTE_LEVELS: tuple[str, ...] = (PILOT, PROVISIONAL, RANKED)


class NoPublicationLevels(ValueError):
    """The protocol defines no publication levels (e.g. Tovaki uses a publication gate)."""


def _title(key: str) -> str:
    return key.replace("_", " ").capitalize()


@dataclass(frozen=True)
class PublicationLevels:
    """The ``publication_levels`` section of a definition, plus the jury minimums."""

    section: Mapping[str, Any]
    minimum_complete_view: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_definition(cls, source: Any) -> PublicationLevels:
        """Accept a ``rounds.protocols.Protocol``, a full definition dict, or the
        ``publication_levels`` section itself."""
        jury: Mapping[str, Any] = {}
        if hasattr(source, "publication_levels"):
            section = source.publication_levels
            jury = source.jury or {}
        elif isinstance(source, Mapping) and "publication_levels" in source:
            section = source["publication_levels"]
            jury = source.get("jury") or {}
        else:
            section = source
        if not section:
            raise NoPublicationLevels(
                "this protocol defines no publication_levels; scored protocols publish through "
                "their publication gate (stats.scorecards)"
            )
        return cls(dict(section), dict(jury.get("minimum_complete_view") or {}))

    def label_text(self, key: str) -> str:
        entry = self.section.get(key)
        if isinstance(entry, Mapping) and "label" in entry:
            return str(entry["label"])
        return _title(key)

    def requirements(self, key: str) -> dict[str, int]:
        """``{count name: minimum}`` for a level, from its ``min_<count>`` keys."""
        entry = self.section.get(key) or {}
        return {k[4:]: int(v) for k, v in entry.items() if k.startswith("min_")}

    @property
    def open_record_systems(self) -> int:
        return int(self.section[OPEN_RECORD]["qualified_systems"])

    @property
    def head_to_head_systems(self) -> int:
        return int(self.section[HEAD_TO_HEAD]["qualified_systems"])

    @property
    def pilot_below_votes(self) -> int:
        return int(self.section[PILOT]["max_valid_votes_exclusive"])

    @property
    def vote_threshold_classes(self) -> tuple[str, ...]:
        return tuple(self.section.get("vote_thresholds_apply_to") or ())

    @property
    def long_form_min_prompts(self) -> int:
        return int(self.section["long_form_min_prompts"])

    @property
    def long_form_equal_run_counts(self) -> bool:
        return bool(self.section.get("long_form_equal_run_counts"))

    @property
    def one_prompt_result(self) -> str:
        return str(self.section["one_prompt_result"])

    @property
    def open_record_statement(self) -> str:
        return str(self.section["open_record_statement"])


@dataclass(frozen=True)
class PoolCounts:
    """What stands behind each label: per-system counts and the pool's distinct prompts."""

    systems: pd.DataFrame  # index system; columns votes, prompts, opponents, voters[, runs]
    prompts: int
    ballots: int
    voters: int


def pool_counts(
    ballots: pd.DataFrame,
    *,
    systems: Sequence[str] | None = None,
    prompt: str = "prompt",
    voter: str = "voter",
    run_columns: tuple[str, str] = ("run_a", "run_b"),
) -> PoolCounts:
    """Count votes, prompts, opponents, voters (and runs, when run columns exist) per system.

    ``ballots`` are the valid ballots of one pool (columns ``a``, ``b``, ``prompt``, ``voter``;
    ``run_a``/``run_b`` optional). ``systems`` lists every qualified system, including any
    that received no ballot (it then has zero counts).
    """
    missing = [c for c in ("a", "b", prompt, voter) if c not in ballots.columns]
    if missing:
        raise ValueError(f"ballots lack column(s) {', '.join(missing)}")
    has_runs = all(c in ballots.columns for c in run_columns)
    both = pd.concat([ballots["a"], ballots["b"]], ignore_index=True)
    system_code, names = pd.factorize(both, sort=True)
    n_rows = len(ballots)
    n_systems = len(names)
    opponent_code = np.concatenate([system_code[n_rows:], system_code[:n_rows]])

    def distinct_per_system(other: np.ndarray) -> np.ndarray:
        """Number of distinct ``other`` codes seen with each system."""
        width = int(other.max()) + 1 if other.size else 1
        pairs = np.unique(system_code.astype(np.int64) * width + other)
        return np.bincount(pairs // width, minlength=n_systems)

    def codes(column: str) -> np.ndarray:
        code, _ = pd.factorize(ballots[column])
        return np.tile(code, 2)

    columns = {
        "votes": np.bincount(system_code, minlength=n_systems),
        "prompts": distinct_per_system(codes(prompt)),
        "opponents": distinct_per_system(opponent_code),
        "voters": distinct_per_system(codes(voter)),
    }
    if has_runs:
        run_code, _ = pd.factorize(
            pd.concat([ballots[run_columns[0]], ballots[run_columns[1]]], ignore_index=True)
        )
        columns["runs"] = distinct_per_system(run_code)
    table = pd.DataFrame(columns, index=pd.Index(np.asarray(names, dtype=object)))
    if systems is not None:
        unknown = sorted(set(table.index) - set(systems), key=str)
        if unknown:
            raise ValueError(f"ballots name systems outside the qualified list: {unknown}")
        table = table.reindex(list(systems), fill_value=0)
    table.index.name = "system"
    table = table.astype(int)
    return PoolCounts(
        systems=table,
        prompts=int(ballots[prompt].nunique()),
        ballots=n_rows,
        voters=int(ballots[voter].nunique()),
    )


@dataclass(frozen=True)
class SystemLabel:
    system: str
    key: str
    text: str
    counts: dict[str, int]
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class PublicationResult:
    """A pool's publication label, per-system labels with their counts, and why."""

    result_type: str
    key: str
    text: str
    duration_class: str
    systems: tuple[SystemLabel, ...]
    leader: str | None = None
    statement: str | None = None
    reasons: tuple[str, ...] = ()
    prompts: int = 0

    def label_of(self, system: str) -> SystemLabel:
        for entry in self.systems:
            if entry.system == system:
                return entry
        raise KeyError(system)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (tuples become lists)."""
        data = asdict(self)
        data["systems"] = [dict(s, reasons=list(s["reasons"])) for s in data["systems"]]
        data["reasons"] = list(data["reasons"])
        return data


def _counts_row(counts: PoolCounts, system: str) -> dict[str, int]:
    return {k: int(v) for k, v in counts.systems.loc[system].items()}


def _unmet(required: Mapping[str, int], row: Mapping[str, int], label: str) -> list[str]:
    reasons = []
    for name, minimum in required.items():
        have = row.get(name)
        if have is None:
            reasons.append(f"{name} not counted; {label} needs {minimum}")
        elif have < minimum:
            reasons.append(f"{have} {name} < {minimum} needed for {label}")
    return reasons


def _leader_checks(
    intervals: pd.DataFrame | None, loo_top: Sequence[Any] | pd.Series | None
) -> tuple[str | None, list[str]]:
    """The top system if its interval is strictly above the second's and it stays on top in
    every leave-one-prompt-out refit; otherwise None and the reasons."""
    if intervals is None or len(intervals) < 2:
        return None, ["no intervals given: Leader needs non-overlapping intervals"]
    ranked = intervals.sort_values("estimate", ascending=False)
    top, second = ranked.index[0], ranked.index[1]
    reasons = []
    if not ranked.loc[top, "lower"] > ranked.loc[second, "upper"]:
        reasons.append(
            f"{top}'s interval [{ranked.loc[top, 'lower']:.4g}, {ranked.loc[top, 'upper']:.4g}] "
            f"overlaps {second}'s [{ranked.loc[second, 'lower']:.4g}, "
            f"{ranked.loc[second, 'upper']:.4g}]"
        )
    if loo_top is None:
        reasons.append("no prompt sensitivity given: Leader needs a stable top system")
    else:
        tops = list(loo_top)
        if not tops:
            reasons.append("no leave-one-prompt-out refit available")
        elif any(pd.isna(t) for t in tops):
            reasons.append("a leave-one-prompt-out refit had no finite estimate")
        elif any(t != top for t in tops):
            changed = sum(1 for t in tops if t != top)
            reasons.append(
                f"{top} is not on top when {changed} of {len(tops)} prompts are left out"
            )
    return (top if not reasons else None), reasons


def publication_label(
    levels: PublicationLevels | Any,
    *,
    duration_class: str,
    counts: PoolCounts,
    intervals: pd.DataFrame | None = None,
    loo_top: Sequence[Any] | pd.Series | None = None,
    run_counts: Mapping[str, int] | None = None,
    complete_view_jurors: int | None = None,
    winner_claim_powered: bool | None = None,
) -> PublicationResult:
    """Label one pool's result.

    ``levels``: a :class:`PublicationLevels`, a ``Protocol`` or a definition dict.
    ``counts``: from :func:`pool_counts` (its index lists the qualified systems).
    ``intervals``: ``estimate``/``lower``/``upper`` per system (``BradleyTerryBootstrap
    .intervals()``); ``loo_top``: the top system of each leave-one-prompt-out refit
    (``PromptSensitivity.top``); both are needed for Leader.
    Long form only: ``run_counts`` (conforming runs per system; defaults to the ``runs``
    count), ``complete_view_jurors`` (checked against the definition's jury minimum), and
    ``winner_claim_powered`` (the power analysis supports a winner claim).
    """
    if not isinstance(levels, PublicationLevels):
        levels = PublicationLevels.from_definition(levels)
    systems = [str(s) for s in counts.systems.index]
    n_systems = len(systems)
    if n_systems == 0:
        raise ValueError("no qualified system in the pool")
    rows = {s: _counts_row(counts, s) for s in counts.systems.index}

    def uniform(key: str, reasons: Sequence[str] = ()) -> tuple[SystemLabel, ...]:
        text = levels.label_text(key)
        return tuple(
            SystemLabel(str(s), key, text, rows[s], tuple(reasons)) for s in counts.systems.index
        )

    if n_systems == levels.open_record_systems:
        return PublicationResult(
            result_type=OPEN_RECORD,
            key=OPEN_RECORD,
            text=levels.label_text(OPEN_RECORD),
            duration_class=duration_class,
            systems=uniform(OPEN_RECORD),
            statement=levels.open_record_statement,
            reasons=("one qualified system: an open record does not imply first place",),
            prompts=counts.prompts,
        )
    if counts.prompts == 1:
        key = levels.one_prompt_result
        why = "one prompt: a challenge result, not a general system rank"
        return PublicationResult(
            result_type=key,
            key=key,
            text=levels.label_text(key),
            duration_class=duration_class,
            systems=uniform(key, (why,)),
            reasons=(why,),
            prompts=1,
        )
    if n_systems == levels.head_to_head_systems:
        return PublicationResult(
            result_type=HEAD_TO_HEAD,
            key=HEAD_TO_HEAD,
            text=levels.label_text(HEAD_TO_HEAD),
            duration_class=duration_class,
            systems=uniform(HEAD_TO_HEAD),
            reasons=("two qualified systems",),
            prompts=counts.prompts,
        )
    if duration_class in levels.vote_threshold_classes:
        return _vote_leaderboard(levels, duration_class, counts, rows, intervals, loo_top)
    return _long_form_leaderboard(
        levels,
        duration_class,
        counts,
        rows,
        intervals,
        loo_top,
        run_counts,
        complete_view_jurors,
        winner_claim_powered,
    )


def _vote_leaderboard(
    levels: PublicationLevels,
    duration_class: str,
    counts: PoolCounts,
    rows: Mapping[Any, dict[str, int]],
    intervals: pd.DataFrame | None,
    loo_top: Sequence[Any] | pd.Series | None,
) -> PublicationResult:
    labels: dict[Any, tuple[str, list[str]]] = {}
    provisional = levels.requirements(PROVISIONAL)
    ranked = levels.requirements(RANKED)
    for system, row in rows.items():
        if row["votes"] < levels.pilot_below_votes:
            reasons = [
                f"{row['votes']} valid votes < {levels.pilot_below_votes}: "
                f"{levels.label_text(PILOT)}"
            ]
            labels[system] = (PILOT, reasons)
            continue
        missing_prov = _unmet(provisional, row, levels.label_text(PROVISIONAL))
        if missing_prov:
            labels[system] = (PILOT, missing_prov)
            continue
        missing_ranked = _unmet(ranked, row, levels.label_text(RANKED))
        if missing_ranked:
            labels[system] = (PROVISIONAL, missing_ranked)
            continue
        labels[system] = (RANKED, [])
    leader, leader_reasons = _leader_checks(intervals, loo_top)
    board_reasons: list[str] = []
    if leader is not None and labels.get(leader, (None,))[0] != RANKED:
        leader_reasons = [f"{leader} is not {levels.label_text(RANKED)}"]
        leader = None
    if leader is not None:
        labels[leader] = (LEADER, ["stable on top with a non-overlapping interval"])
    else:
        board_reasons += [f"no Leader: {r}" for r in leader_reasons]
    entries = tuple(
        SystemLabel(str(s), key, levels.label_text(key), rows[s], tuple(reasons))
        for s, (key, reasons) in labels.items()
    )
    weakest = min(
        (RANKED if key == LEADER else key for key, _ in labels.values()),
        key=_VOTE_LEVELS.index,
    )
    return PublicationResult(
        result_type=LEADERBOARD,
        key=weakest,
        text=levels.label_text(weakest),
        duration_class=duration_class,
        systems=entries,
        leader=None if leader is None else str(leader),
        reasons=tuple(board_reasons),
        prompts=counts.prompts,
    )


def _long_form_leaderboard(
    levels: PublicationLevels,
    duration_class: str,
    counts: PoolCounts,
    rows: Mapping[Any, dict[str, int]],
    intervals: pd.DataFrame | None,
    loo_top: Sequence[Any] | pd.Series | None,
    run_counts: Mapping[str, int] | None,
    complete_view_jurors: int | None,
    winner_claim_powered: bool | None,
) -> PublicationResult:
    reasons: list[str] = []
    if counts.prompts < levels.long_form_min_prompts:
        reasons.append(
            f"{counts.prompts} prompts < {levels.long_form_min_prompts} needed for a long-form "
            "leaderboard"
        )
    if levels.long_form_equal_run_counts:
        runs = dict(run_counts) if run_counts is not None else None
        if runs is None and "runs" in counts.systems.columns:
            runs = {s: int(r) for s, r in counts.systems["runs"].items()}
        if runs is None:
            reasons.append("run counts unknown: a long-form leaderboard needs equal run counts")
        elif len(set(runs.get(s, 0) for s in rows)) > 1:
            shown = ", ".join(f"{s}: {runs.get(s, 0)}" for s in rows)
            reasons.append(f"unequal run counts ({shown})")
    minimum = levels.minimum_complete_view.get(duration_class)
    if minimum is not None:
        if complete_view_jurors is None:
            reasons.append(f"complete-view juror count unknown (minimum {minimum})")
        elif complete_view_jurors < minimum:
            reasons.append(f"{complete_view_jurors} complete-view jurors < minimum {minimum}")
    if reasons:
        return PublicationResult(
            result_type=LEADERBOARD,
            key=DESCRIPTIVE,
            text=levels.label_text(DESCRIPTIVE),
            duration_class=duration_class,
            systems=tuple(
                SystemLabel(str(s), DESCRIPTIVE, levels.label_text(DESCRIPTIVE), rows[s])
                for s in rows
            ),
            reasons=tuple(reasons),
            prompts=counts.prompts,
        )
    leader, leader_reasons = _leader_checks(intervals, loo_top)
    if leader is not None and not winner_claim_powered:
        leader, leader_reasons = None, ["a formal endurance winner claim needs a power analysis"]
    entries = []
    for s, row in rows.items():
        key = LEADER if s == leader else LEADERBOARD
        entries.append(SystemLabel(str(s), key, levels.label_text(key), row))
    juror_note = (
        [f"{complete_view_jurors} complete-view jurors"] if complete_view_jurors is not None else []
    )
    return PublicationResult(
        result_type=LEADERBOARD,
        key=LEADERBOARD,
        text=levels.label_text(LEADERBOARD),
        duration_class=duration_class,
        systems=tuple(entries),
        leader=None if leader is None else str(leader),
        reasons=tuple(juror_note + [f"no Leader: {r}" for r in leader_reasons if leader is None]),
        prompts=counts.prompts,
    )


def is_descriptive(levels: PublicationLevels | Any, duration_class: str, jurors: int) -> bool:
    """True when a jury result falls below the definition's minimum complete-view count."""
    if not isinstance(levels, PublicationLevels):
        levels = PublicationLevels.from_definition(levels)
    minimum = levels.minimum_complete_view.get(duration_class)
    if minimum is None:
        raise KeyError(f"no minimum complete-view count for {duration_class!r}")
    return jurors < int(minimum)
