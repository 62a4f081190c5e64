"""Reads behind results: the inputs documents, the latest snapshots, disclosures, identities.

The inputs document (``result_inputs``) is the one place that turns the round's valid ballots,
scorecards and runs into the tables ``stats.results.compute_result`` reads. Everything in it is
keyed by anonymous entry labels and run ids; identities (``identity_map``) exist only after the
round's reveal and are joined at display time, so no snapshot, page or export carries one
before the unlock (issue 8).
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from django.db.models import Max, Q, QuerySet
from django.urls import reverse

from ledger.models import EntryKind, LogEntry
from rounds.models import Disclosure, Round, identity_commitment
from rounds.selectors import runs_of_round
from rounds.services import run_cost_summary
from stats import bootstrap as bs
from stats import bradley_terry as bt
from stats import results
from stats.models import ResultSnapshot

# Rounds whose results anyone may read: judgments are locked (and committed to the log), or the
# identities are revealed. A demo round also shows interim results while it takes votes, so a
# newcomer sees a real leaderboard after ``make run``; the page says they are interim.
PUBLIC_RESULT_STATES: tuple[str, ...] = (Round.State.LOCKED, Round.State.REVEALED)
INTERIM_DEMO_STATES: tuple[str, ...] = (Round.State.OPEN, Round.State.JUDGING)

# The protocol names no significance level or power for "a power analysis before a formal
# winner claim"; these conventional planning values are recorded in every inputs document and
# published with the result.
WINNER_CLAIM_ALPHA = 0.05
WINNER_CLAIM_POWER = 0.8

# Definition sections the calculations read; copied into the inputs document so the numbers
# can be recomputed from the document alone.
DEFINITION_SECTIONS: tuple[str, ...] = (
    "final_states",
    "publication_levels",
    "bootstrap_clusters",
    "jury",
    "voting",
    "scoring",
    "publication_gate",
    "weighted_composite_allowed",
    "quality_dimensions",
    "segment_result_name",
    "cost_fields",
)


class ResultUnavailable(LookupError):
    """The data this result kind reads is not available (its source app does not provide it)."""


# ---------------------------------------------------------------------------------------------
# Which results a round has


def results_visible(round_: Round) -> bool:
    """May the public read this round's results now?"""
    if round_.state in PUBLIC_RESULT_STATES:
        return True
    return round_.is_demo and round_.state in INTERIM_DEMO_STATES


def results_interim(round_: Round) -> bool:
    """Results of a demo round that still takes judgments: they can change."""
    return round_.state not in PUBLIC_RESULT_STATES


def public_result_rounds() -> QuerySet[Round]:
    """Rounds with public results, newest first, with what the index shows."""
    return (
        Round.objects.filter(
            Q(state__in=PUBLIC_RESULT_STATES) | Q(is_demo=True, state__in=INTERIM_DEMO_STATES)
        )
        .select_related("protocol_version")
        .order_by("-committed_at", "-id")
    )


def result_kinds_for(round_: Round) -> list[str]:
    """The result kinds the round's protocol defines for its duration class.

    Pairwise-vote classes publish the full-film vote result; jury classes publish the quality
    dimensions, the holistic paired choice (when the definition requires one) and the segment
    result (when it defines a segment schedule); scorecard classes publish weighted scorecards.
    Every round publishes its reliability result.
    """
    protocol = round_.protocol
    evaluation = protocol.evaluation(round_.duration_class)
    kinds: list[str] = []
    if evaluation == "pairwise_vote":
        kinds.append(results.FULL_FILM_VOTES)
    elif evaluation == "jury":
        kinds.append(results.JURY_DIMENSIONS)
        if protocol.definition.get("holistic_paired_choice"):
            kinds.append(results.HOLISTIC_CHOICE)
        if protocol.segment_schedule(round_.duration_class):
            kinds.append(results.SEGMENT)
    elif evaluation == "scorecard":
        kinds.append(results.TOVAKI_SCORECARDS)
    kinds.append(results.RELIABILITY)
    return kinds


def result_seed(round_: Round, result_kind: str) -> int:
    """The bootstrap seed of a result: derived from the round's committed controls hash.

    The controls were hashed and logged before any judgment, so nobody can choose a seed after
    seeing the data (no "seed shopping"), and anyone can derive it again.
    """
    from duel.canonical import canonical_sha256

    digest = canonical_sha256(
        {"round": round_.slug, "controls_sha256": round_.controls_sha256, "result": result_kind}
    )
    return int(digest[:15], 16)


# ---------------------------------------------------------------------------------------------
# The inputs document


def _runs_rows(round_: Round) -> list[dict[str, Any]]:
    return [
        {
            "run": str(run.public_id),
            "label": run.entry.label,
            "prompt": run.package.prompt_key,
            "final_state": run.final_state,
            "exhibition": run.is_exhibition,
            "has_proxy": run.proxy_file_id is not None,
        }
        for run in runs_of_round(round_).filter(started_at__isnull=False)
    ]


def _reliability_rows(round_: Round) -> list[dict[str, Any]]:
    runs = (
        runs_of_round(round_)
        .filter(started_at__isnull=False)
        .select_related("entry__round__protocol_version")
        .prefetch_related("attempts")
    )
    rows = []
    for run in runs:
        attempts = list(run.attempts.all())
        rows.append(
            {
                "run": str(run.public_id),
                "label": run.entry.label,
                "prompt": run.package.prompt_key,
                "state": run.state,
                "final_state": run.final_state,
                "exhibition": run.is_exhibition,
                "has_proxy": run.proxy_file_id is not None,
                "wall_time_s": run.wall_time_s,
                "attempts": len(attempts),
                # Codes only: provider messages and reasons are free text that could name a
                # system (Tovaki: "technical failures and retries redacted").
                "retry_reasons": [a.retry_reason for a in attempts if a.retry_reason],
                "failure_codes": [a.failure_code for a in attempts if a.failure_code],
                "output_sha256": run.output_sha256,
                "cost": run_cost_summary(run),
            }
        )
    return rows


def _entry_rows(round_: Round) -> list[dict[str, Any]]:
    entries = round_.entries.select_related("system_version").order_by("label")
    return [{"label": e.label, "path": e.path, "exhibition": e.is_exhibition} for e in entries]


def _records(frame: pd.DataFrame, columns: dict[str, str]) -> list[dict[str, Any]]:
    """Rows of ``frame`` renamed (source column -> exported column) as plain JSON values."""
    out = []
    for row in frame.to_dict(orient="records"):
        item = {}
        for source, target in columns.items():
            value = row[source]
            if isinstance(value, bool) or value is None:
                item[target] = value
            elif hasattr(value, "item") and not isinstance(value, str):
                item[target] = value.item()  # numpy scalar
            elif isinstance(value, int | float):
                item[target] = value
            else:
                item[target] = str(value)
        out.append(item)
    return out


def _exclusion_counts(frame: pd.DataFrame) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for reason in frame.loc[frame["excluded"].astype(bool), "exclusion_reason"]:
        for part in str(reason).split(","):
            if part:
                counts[part] += 1
    return dict(sorted(counts.items()))


def _valid(frame: pd.DataFrame) -> pd.DataFrame:
    keep = ~frame["excluded"].astype(bool)
    if "locked" in frame.columns:
        keep &= frame["locked"].astype(bool)
    return frame.loc[keep].reset_index(drop=True)


def _juries():
    try:
        from juries import selectors as jury_selectors
    except ImportError as exc:  # the juries app does not provide its frames yet
        raise ResultUnavailable(f"jury data is not available: {exc}") from exc
    return jury_selectors


def _complete_view_rows(round_: Round, panels: list[str]) -> list[dict[str, Any]]:
    """Per panel and entry label, the complete-view jurors (``juries.selectors``)."""
    juries = _juries()
    rows = []
    for panel in sorted(set(panels)):
        counts = juries.complete_view_counts(round_, panel=panel)
        rows += [{"panel": panel, "label": k, "jurors": int(v)} for k, v in sorted(counts.items())]
    return rows


def _votes_tables(round_: Round) -> tuple[dict[str, Any], dict[str, Any]]:
    from voting.selectors import ballots_frame

    frame = ballots_frame(round_, include_excluded=True)
    notes: dict[str, Any] = {"excluded_ballots": _exclusion_counts(frame)}
    valid = _valid(frame)
    if not round_.is_demo:
        # Synthetic ballots count only in demo rounds (the database refuses them elsewhere;
        # this keeps any that slipped through out of a real result).
        synthetic = valid["synthetic"].astype(bool)
        notes["synthetic_ballots_dropped"] = int(synthetic.sum())
        valid = valid.loc[~synthetic].reset_index(drop=True)
    columns = {c: c for c in results.TABLE_COLUMNS["ballots"]}
    rows = _records(valid.sort_values("ballot_id", kind="stable"), columns)
    return {"ballots": results.table(rows, "ballots")}, notes


def _segment_tables(round_: Round) -> tuple[dict[str, Any], dict[str, Any]]:
    frame = _juries().segment_votes_frame(round_)
    valid = _valid(frame)
    mapping = {"juror_or_voter": "voter"}
    mapping.update({c: c for c in results.TABLE_COLUMNS["segment_votes"] if c != "voter"})
    rows = _records(valid, mapping)
    rows.sort(key=lambda r: (r["panel"], r["prompt"], str(r["segment"]), r["run_a"], r["voter"]))
    return {"segment_votes": results.table(rows, "segment_votes")}, {
        "excluded_votes": _exclusion_counts(frame)
    }


def _choices_tables(round_: Round) -> tuple[dict[str, Any], dict[str, Any]]:
    juries = _juries()
    frame = juries.holistic_choices_frame(round_)
    valid = _valid(frame)
    rows = _records(valid, {c: c for c in results.TABLE_COLUMNS["choices"]})
    rows.sort(key=lambda r: (r["panel"], r["prompt"], r["juror"], r["run_a"], r["run_b"]))
    panels = [r["panel"] for r in rows]
    tables = {
        "choices": results.table(rows, "choices"),
        "complete_view": results.table(_complete_view_rows(round_, panels), "complete_view"),
    }
    return tables, {"excluded_choices": _exclusion_counts(frame)}


def _scores_tables(round_: Round, *, complete_view: bool) -> tuple[dict[str, Any], dict]:
    juries = _juries()
    frame = juries.scorecards_frame(round_)
    valid = _valid(frame)
    rows = _records(valid, {c: c for c in results.TABLE_COLUMNS["scores"]})
    rows.sort(key=lambda r: (r["panel"], r["scorecard_id"], r["dimension"]))
    tables = {"scores": results.table(rows, "scores")}
    if complete_view:
        panels = [r["panel"] for r in rows]
        tables["complete_view"] = results.table(
            _complete_view_rows(round_, panels), "complete_view"
        )
    return tables, {"excluded_scores": _exclusion_counts(frame)}


def result_inputs(
    round_: Round, result_kind: str, *, n_replicates: int = bs.DEFAULT_REPLICATES
) -> dict[str, Any]:
    """The inputs document of one result kind of a round: exactly what the math reads.

    Raises :class:`ResultUnavailable` when the kind's source data cannot be read.
    """
    if result_kind not in results.RESULT_KINDS:
        raise ValueError(f"unknown result kind {result_kind!r}")
    protocol = round_.protocol_version
    definition = protocol.definition
    tables: dict[str, Any]
    if result_kind == results.FULL_FILM_VOTES:
        tables, notes = _votes_tables(round_)
    elif result_kind == results.SEGMENT:
        tables, notes = _segment_tables(round_)
    elif result_kind == results.HOLISTIC_CHOICE:
        tables, notes = _choices_tables(round_)
    elif result_kind == results.JURY_DIMENSIONS:
        tables, notes = _scores_tables(round_, complete_view=True)
    elif result_kind == results.TOVAKI_SCORECARDS:
        tables, notes = _scores_tables(round_, complete_view=False)
    else:
        tables = {
            "reliability_runs": results.table(_reliability_rows(round_), "reliability_runs"),
            "entries": results.table(_entry_rows(round_), "entries"),
        }
        notes = {}
    if result_kind != results.RELIABILITY:
        tables["runs"] = results.table(_runs_rows(round_), "runs")
    parameters: dict[str, Any] = {
        "seed": result_seed(round_, result_kind),
        "n_replicates": int(n_replicates),
        "level": bs.DEFAULT_LEVEL,
        "display_scale": {
            "anchor": bt.DISPLAY_ANCHOR,
            "points_per_natural_log": bt.DISPLAY_POINTS_PER_NATURAL_LOG,
        },
    }
    if result_kind == results.HOLISTIC_CHOICE:
        parameters["power"] = {"alpha": WINNER_CLAIM_ALPHA, "power": WINNER_CLAIM_POWER}
    return {
        "format": results.INPUTS_FORMAT,
        "method": results.METHOD,
        "round": round_.slug,
        "result_kind": result_kind,
        "protocol": {"key": protocol.key, "version": protocol.version, "sha256": protocol.sha256},
        "definition": {k: definition[k] for k in DEFINITION_SECTIONS if k in definition},
        "pool": {
            "result_type": round_.result_type,
            **{k: getattr(round_, k) for k in results.ROUND_POOL_FIELDS},
            "is_demo": round_.is_demo,
            "currency": round_.currency,
        },
        "parameters": parameters,
        "notes": notes,
        "tables": tables,
    }


# ---------------------------------------------------------------------------------------------
# Snapshots


def latest_snapshots(round_: Round) -> dict[str, ResultSnapshot]:
    """The newest snapshot of each result kind of the round, in one query (inputs deferred)."""
    newest = (
        ResultSnapshot.objects.filter(round=round_)
        .values("result_kind")
        .annotate(newest=Max("id"))
        .values("newest")
    )
    rows = ResultSnapshot.objects.filter(id__in=newest).defer("inputs")
    return {s.result_kind: s for s in rows}


def snapshot_of_round(round_: Round, snapshot_id: int) -> ResultSnapshot | None:
    return ResultSnapshot.objects.filter(round=round_, pk=snapshot_id).first()


def headline_snapshots(rounds: list[Round]) -> dict[int, ResultSnapshot]:
    """For each round, the newest snapshot of its first (headline) result kind, one query."""
    if not rounds:
        return {}
    newest = (
        ResultSnapshot.objects.filter(round__in=rounds)
        .exclude(result_kind=results.RELIABILITY)
        .values("round_id", "result_kind")
        .annotate(newest=Max("id"))
        .values("newest")
    )
    out: dict[int, ResultSnapshot] = {}
    for snapshot in ResultSnapshot.objects.filter(id__in=newest).defer("inputs").order_by("id"):
        out.setdefault(snapshot.round_id, snapshot)
    return out


# ---------------------------------------------------------------------------------------------
# Identities and disclosures


def identity_map(round_: Round) -> dict[str, dict[str, str]]:
    """Label -> identity, only after the round's reveal; empty before it (issue 8)."""
    if not round_.identities_revealed:
        return {}
    entries = round_.entries.select_related("system_version__system").order_by("label")
    return {
        e.label: {
            "identity": e.identity,
            "system": e.system_version.system.name,
            "vendor": e.system_version.system.vendor,
            "version": e.system_version.version,
            "customer_tier": e.system_version.customer_tier,
        }
        for e in entries
    }


def round_disclosures(round_: Round) -> dict[str, Any]:
    """What every results page and export of the round discloses (issue 9, "Disclosures").

    The operator's relationship from the protocol's governance section and every round-level
    or platform-wide disclosure are always shown. Disclosures tied to an entrant's system (and
    the system's recorded operator relationship) would reveal who entered the round, so before
    the reveal only their number is shown; after it, each one with the entry label it concerns.
    """
    governance = round_.protocol.definition.get("governance") or {}
    entries = list(round_.entries.select_related("system_version__system"))
    label_of_system = {e.system_version.system_id: e.label for e in entries}
    general = Disclosure.objects.filter(
        Q(round=round_) | Q(round__isnull=True), system__isnull=True
    ).order_by("created_at", "id")
    tied = list(
        Disclosure.objects.filter(
            Q(system_id__in=list(label_of_system)) | Q(round=round_, system__isnull=False)
        ).order_by("created_at", "id")
    )
    relationships = [
        e for e in entries if (e.system_version.system.operator_relationship or "").strip()
    ]
    document: dict[str, Any] = {
        "operator_disclosure": governance.get("operator_disclosure"),
        "disclosures": [
            {
                "kind": d.kind,
                "party": d.party,
                "text": d.text,
                "amount": None if d.amount is None else str(d.amount),
                "currency": d.currency,
                "scope": "round" if d.round_id else "platform",
                "log_index": d.log_index,
            }
            for d in general
        ],
        "entrant_disclosures_withheld": 0,
        "entrant_disclosures": [],
    }
    count = len(tied) + len(relationships)
    if not round_.identities_revealed:
        document["entrant_disclosures_withheld"] = count
        return document
    items = [
        {
            "label": label_of_system.get(d.system_id),
            "kind": d.kind,
            "party": d.party,
            "text": d.text,
            "amount": None if d.amount is None else str(d.amount),
            "currency": d.currency,
            "log_index": d.log_index,
        }
        for d in tied
    ]
    items += [
        {
            "label": e.label,
            "kind": Disclosure.Kind.OPERATOR_RELATIONSHIP,
            "party": "operator",
            "text": e.system_version.system.operator_relationship,
            "amount": None,
            "currency": "",
            "log_index": None,
        }
        for e in relationships
    ]
    document["entrant_disclosures"] = items
    return document


def platform_disclosures(rounds: list[Round]) -> dict[str, Any]:
    """Disclosures for the results index: the operator disclosure of each protocol shown and
    every platform-wide disclosure (no round, no system)."""
    operator = []
    for round_ in rounds:
        text = (round_.protocol.definition.get("governance") or {}).get("operator_disclosure")
        if text and text not in operator:
            operator.append(text)
    general = Disclosure.objects.filter(round__isnull=True, system__isnull=True).order_by(
        "created_at", "id"
    )
    return {
        "operator_disclosures": operator,
        "disclosures": [{"kind": d.kind, "party": d.party, "text": d.text} for d in general],
    }


def disclosure_schedule(round_: Round) -> list[dict[str, Any]] | None:
    """The protocol's disclosure schedule (Tovaki ``disclosure_schedule``) at the round's stage:
    for each stage, its items and whether they are published now."""
    schedule = round_.protocol.disclosure_schedule
    if not schedule:
        return None
    locked = round_.state in PUBLIC_RESULT_STATES
    status = {
        "public_now": "published",
        "withheld_until_scores_are_locked": "published" if locked else "withheld",
        "publish_with_any_result": "published with this result",
        "remain_private": "private",
    }
    return [
        {
            "stage": stage,
            "status": status.get(stage, "see the protocol"),
            "items": list(schedule.get(stage) or []),
            # The model roster and the mapping are identities: the platform shows them only
            # after the explicit, logged unlock (controls.explicit_unlock_required_to_reveal).
            "identities_after_unlock": stage == "withheld_until_scores_are_locked",
        }
        for stage in schedule.get("stages", [])
    ]


# ---------------------------------------------------------------------------------------------
# The reveal check


@dataclass
class RevealVerification:
    """Outcome of :func:`verify_reveal`: every revealed identity against its commitment."""

    ok: bool
    reveal_index: int | None
    checked: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def verify_reveal(round_: Round) -> RevealVerification:
    """Recompute each label's identity commitment from the ``reveal_unlock`` entry and compare
    it with the ``entry_commit`` entry logged when the round was committed.

    Also checks that every committed label was revealed and that the unlock came after every
    ballot and scorecard lock of the round in the log. Anyone can run the same check on the
    public log (``identity_commitment`` is SHA-256 over canonical JSON of label, identity and
    nonce).
    """
    subject = f"round:{round_.slug}"
    reveal = (
        LogEntry.objects.filter(kind=EntryKind.REVEAL_UNLOCK, subject=subject)
        .order_by("index")
        .first()
    )
    if reveal is None:
        return RevealVerification(False, None, problems=["the round has no reveal_unlock entry"])
    commits = {
        e.payload["label"]: e
        for e in LogEntry.objects.filter(
            kind=EntryKind.ENTRY_COMMIT, subject__startswith=f"{subject}/entry:"
        ).order_by("index")
    }
    problems: list[str] = []
    checked: list[dict[str, Any]] = []
    revealed = {item["label"]: item for item in reveal.payload.get("entries", [])}
    for label in sorted(set(commits) | set(revealed)):
        commit, item = commits.get(label), revealed.get(label)
        if commit is None:
            problems.append(f"label {label} was revealed but never committed")
            continue
        if item is None:
            problems.append(f"label {label} was committed but not revealed")
            continue
        recomputed = identity_commitment(label, item["identity"], item["nonce"])
        match = recomputed == commit.payload.get("identity_commitment")
        if not match:
            problems.append(f"label {label}: the revealed identity does not match its commitment")
        if commit.index > reveal.index:
            problems.append(f"label {label} was committed after the reveal")
        checked.append(
            {
                "label": label,
                "identity": item["identity"],
                "commitment": commit.payload.get("identity_commitment"),
                "commit_index": commit.index,
                "matches": match,
            }
        )
    judged_after = (
        LogEntry.objects.filter(
            Q(subject=subject) | Q(subject__startswith=f"{subject}/"),
            kind__in=[EntryKind.BALLOT, EntryKind.SCORECARD_LOCK],
            index__gt=reveal.index,
        )
        .order_by("index")
        .values_list("index", flat=True)
        .first()
    )
    if judged_after is not None:
        problems.append(f"a judgment (log entry {judged_after}) was committed after the reveal")
    return RevealVerification(not problems, reveal.index, checked, problems)


# ---------------------------------------------------------------------------------------------
# The round's results document (JSON export) and its CSV form


def _with_identities(value: Any, identities: Mapping[str, Mapping[str, str]]) -> Any:
    """Copy of a result document with ``identity`` next to every ``label`` (after the reveal)."""
    if not identities:
        return value
    if isinstance(value, dict):
        out = {k: _with_identities(v, identities) for k, v in value.items()}
        label = value.get("label")
        if isinstance(label, str) and label in identities:
            out["identity"] = identities[label]["identity"]
        return out
    if isinstance(value, list):
        return [_with_identities(v, identities) for v in value]
    return value


def results_document(
    round_: Round,
    snapshots: Mapping[str, ResultSnapshot],
    *,
    unavailable: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Everything a reader gets about the round's results, as one JSON document.

    Always carries the disclosures and the automated-critics statement (issue 9); identities
    only after the reveal.
    """
    identities = identity_map(round_)
    kinds = result_kinds_for(round_)
    document: dict[str, Any] = {
        "round": round_.slug,
        "title": round_.title,
        "state": round_.state,
        "interim": results_interim(round_),
        "is_demo": round_.is_demo,
        "protocol": {
            "key": round_.protocol_version.key,
            "version": round_.protocol_version.version,
            "sha256": round_.protocol_version.sha256,
        },
        "pool": {
            "result_type": round_.result_type,
            **{k: getattr(round_, k) for k in results.ROUND_POOL_FIELDS},
        },
        "identities_revealed": round_.identities_revealed,
        "revealed_at": round_.revealed_at.isoformat() if round_.revealed_at else None,
        "identities": identities,
        "disclosures": _with_identities(round_disclosures(round_), identities),
        "disclosure_schedule": disclosure_schedule(round_),
        "critics": results.CRITICS_STATEMENT,
        "results": {},
    }
    for kind in kinds:
        snapshot = snapshots.get(kind)
        if snapshot is None:
            document["results"][kind] = {
                "status": "unavailable",
                "reason": (unavailable or {}).get(kind, "not computed yet"),
            }
            continue
        inputs_url = reverse(
            "stats:inputs-json", kwargs={"slug": round_.slug, "snapshot_id": snapshot.pk}
        )
        document["results"][kind] = {
            "snapshot": snapshot.pk,
            "inputs_url": inputs_url,
            "inputs_csv": {
                name: reverse(
                    "stats:inputs-csv",
                    kwargs={"slug": round_.slug, "snapshot_id": snapshot.pk, "table": name},
                )
                for name in results.KIND_TABLES[kind]
            },
            "computed_at": snapshot.computed_at.isoformat(),
            "inputs_sha256": snapshot.inputs_sha256,
            "result_sha256": snapshot.result_sha256,
            "log_index": snapshot.log_index,
            "result": _with_identities(snapshot.result, identities),
        }
    return document


CSV_COLUMNS = (
    "section",
    "result_kind",
    "panel",
    "label",
    "identity",
    "metric",
    "value",
    "lower",
    "upper",
    "detail",
)


def results_csv(document: Mapping[str, Any]) -> str:
    """The results document as one tidy CSV table (one measurement per row).

    Sections: ``disclosure``, ``statement`` (automated critics, scope language), ``rating``,
    ``count``, ``label``, ``win_matrix``, ``dimension``, ``total``, ``reliability``. The
    disclosures come first, so no reader of the export can miss them.
    """
    rows: list[dict[str, Any]] = []
    identities = document.get("identities") or {}

    def add(**values: Any) -> None:
        label = values.get("label")
        if label and label in identities and "identity" not in values:
            values["identity"] = identities[label]["identity"]
        rows.append(values)

    disclosures = document["disclosures"]
    if disclosures.get("operator_disclosure"):
        add(
            section="disclosure",
            metric="operator_relationship",
            detail=disclosures["operator_disclosure"],
        )
    for d in disclosures["disclosures"]:
        add(
            section="disclosure",
            metric=d["kind"],
            value=d["amount"],
            detail=f"{d['party']}: {d['text']}",
        )
    for d in disclosures["entrant_disclosures"]:
        add(
            section="disclosure",
            metric=d["kind"],
            label=d["label"],
            value=d["amount"],
            detail=f"{d['party']}: {d['text']}",
        )
    if disclosures["entrant_disclosures_withheld"]:
        add(
            section="disclosure",
            metric="withheld_until_reveal",
            value=disclosures["entrant_disclosures_withheld"],
            detail="disclosures tied to entrants, shown at the reveal",
        )
    add(section="statement", metric="automated_critics", detail=document["critics"])
    add(
        section="statement",
        metric="protocol",
        detail=document["protocol"]["key"],
        value=document["protocol"]["sha256"],
    )
    for kind, block in document["results"].items():
        result = block.get("result")
        if not result:
            add(section="status", result_kind=kind, metric="status", detail=block["status"])
            continue
        _csv_result(kind, result, add)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: "" if row.get(c) is None else row.get(c) for c in CSV_COLUMNS})
    return buffer.getvalue()


def _csv_ratings(kind: str, panel: str, block: Mapping[str, Any], add) -> None:
    for row in block.get("systems", []):
        add(
            section="rating",
            result_kind=kind,
            panel=panel,
            label=row["label"],
            metric="rating",
            value=row.get("rating"),
            lower=row.get("lower"),
            upper=row.get("upper"),
        )
        for name, count in (row.get("counts") or {}).items():
            add(
                section="count",
                result_kind=kind,
                panel=panel,
                label=row["label"],
                metric=name,
                value=count,
            )
        if row.get("publication"):
            add(
                section="label",
                result_kind=kind,
                panel=panel,
                label=row["label"],
                metric=row["publication"]["key"],
                detail=row["publication"]["text"],
            )
    matrix = block.get("win_matrix") or {}
    for i, winner in enumerate(matrix.get("systems", [])):
        for j, loser in enumerate(matrix["systems"]):
            if i != j:
                add(
                    section="win_matrix",
                    result_kind=kind,
                    panel=panel,
                    label=winner,
                    metric="wins",
                    value=matrix["wins"][i][j],
                    detail=f"against {loser}",
                )


def _csv_result(kind: str, result: Mapping[str, Any], add) -> None:
    if result.get("publication"):
        add(
            section="label",
            result_kind=kind,
            metric=result["publication"]["key"],
            detail=result["publication"]["text"],
        )
    if kind == results.FULL_FILM_VOTES:
        _csv_ratings(kind, "", result, add)
    elif kind in (results.SEGMENT, results.HOLISTIC_CHOICE):
        for panel in result.get("panels", []):
            _csv_ratings(kind, panel["panel"], panel, add)
    elif kind == results.JURY_DIMENSIONS:
        for panel in result.get("panels", []):
            for dim in panel["dimensions"]:
                for row in dim["systems"]:
                    add(
                        section="dimension",
                        result_kind=kind,
                        panel=panel["panel"],
                        label=row["label"],
                        metric=dim["dimension"],
                        value=row["mean"],
                        lower=row["lower"],
                        upper=row["upper"],
                    )
    elif kind == results.TOVAKI_SCORECARDS:
        if result.get("scope_language"):
            add(
                section="statement",
                result_kind=kind,
                metric="scope_language",
                detail=result["scope_language"],
            )
        for panel in result.get("panels", []):
            if panel.get("statement"):
                add(
                    section="statement",
                    result_kind=kind,
                    panel=panel["panel"],
                    metric="close_result",
                    detail=panel["statement"],
                )
            for row in panel.get("totals", []):
                add(
                    section="total",
                    result_kind=kind,
                    panel=panel["panel"],
                    label=row["label"],
                    metric="weighted_total",
                    value=row["total_points"],
                    detail=row["total"],
                )
    elif kind == results.RELIABILITY:
        for entry in result.get("entries", []):
            for state, count in entry["by_final_state"].items():
                add(
                    section="reliability",
                    result_kind=kind,
                    label=entry["label"],
                    metric=state,
                    value=count,
                )
            add(
                section="reliability",
                result_kind=kind,
                label=entry["label"],
                metric="wall_time_s_total",
                value=entry["wall_time_s"]["total"],
            )
            for name, amount in entry["cost"].items():
                add(
                    section="reliability",
                    result_kind=kind,
                    label=entry["label"],
                    metric=f"cost_{name}",
                    value=amount,
                )


# ---------------------------------------------------------------------------------------------
# Recomputing a published result from its exported inputs


@dataclass
class RecomputeCheck:
    """Outcome of recomputing a snapshot's result from its inputs document alone."""

    snapshot: int
    inputs_sha256: str
    inputs_match: bool
    logged: bool
    differences: list[str]

    @property
    def ok(self) -> bool:
        return self.inputs_match and self.logged and not self.differences


def snapshot_recheck(
    snapshot: ResultSnapshot, inputs_text: bytes | str | None = None
) -> RecomputeCheck:
    """Recompute ``snapshot``'s result from an inputs document and compare.

    ``inputs_text`` is a downloaded inputs file (default: the snapshot's stored inputs). Checks
    that its SHA-256 is the one the snapshot and its ``calculation_inputs`` log entry carry,
    recomputes with ``stats.results.compute_result`` and compares with the published result.
    """
    import json

    from duel.canonical import sha256_hex

    if inputs_text is None:
        inputs_text = ResultSnapshot.objects.only("inputs").get(pk=snapshot.pk).inputs
    data = inputs_text.encode("utf-8") if isinstance(inputs_text, str) else inputs_text
    digest = sha256_hex(data)
    entry = LogEntry.objects.filter(index=snapshot.log_index).first()
    logged = bool(
        entry is not None
        and entry.kind == EntryKind.CALCULATION_INPUTS
        and entry.payload.get("inputs_sha256") == snapshot.inputs_sha256
        and entry.payload.get("result_sha256") == snapshot.result_sha256
    )
    recomputed = results.compute_result(json.loads(data))
    return RecomputeCheck(
        snapshot=snapshot.pk,
        inputs_sha256=digest,
        inputs_match=digest == snapshot.inputs_sha256,
        logged=logged,
        differences=results.compare_results(snapshot.result, recomputed),
    )
