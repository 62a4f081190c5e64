"""Reads of the voting app that more than one caller needs (pages, exports, stats, admin).

``ballots_frame`` and ``unlocked_ballot_count`` are the interface the results app builds on
(issue 8); the deidentified export (protocol "Transparency log": battle assignment, side
randomization, vote result, exclusion reason, cohort flags) is built from the same rows.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pandas as pd
from django.db.models import Count, Q, QuerySet

from rounds.models import Round
from rounds.services import salted_hash
from voting.models import Assignment, Ballot, BallotExclusion
from voting.playback import WatchRules

# Round voting settings (``Round.voting_settings``, frozen with the round's controls) and the
# platform defaults for what a round leaves unset.
DEFAULT_BALLOTS_PER_VOTER = 50
DEFAULT_MAX_VOTERS_PER_NETWORK = 25
DEFAULT_VOTING_SETTINGS: dict[str, Any] = {
    "allow_ties": False,
    "show_identities_after_vote": False,
    "ballots_per_voter": DEFAULT_BALLOTS_PER_VOTER,
    "max_voters_per_network": DEFAULT_MAX_VOTERS_PER_NETWORK,
}
VOTING_STATES = (Round.State.OPEN, Round.State.JUDGING)

BALLOT_COLUMNS = [
    "ballot_id",
    "voter",
    "prompt",
    "battle",
    "run_a",
    "run_b",
    "a",
    "b",
    "first",
    "choice",
    "outcome",
    "excluded",
    "exclusion_reason",
    "audio_on",
    "synthetic",
    "device",
    "expertise",
    "locked_at",
    "sha256",
    "log_index",
]


def voting_settings(round_: Round) -> dict[str, Any]:
    """The round's voting settings with the platform defaults filled in."""
    return {**DEFAULT_VOTING_SETTINGS, **(round_.voting_settings or {})}


def watch_rules(round_: Round) -> WatchRules:
    """The protocol's watching rules for this round (``Protocol.voting``)."""
    return WatchRules.from_protocol(round_.protocol.voting)


def round_is_pairwise(round_: Round) -> bool:
    """The round's duration class is judged by blind pairwise votes under its protocol."""
    voting = round_.protocol.voting or {}
    return round_.duration_class in voting.get("duration_classes", [])


def round_accepts_ballots(round_: Round) -> bool:
    return round_.state in VOTING_STATES and round_is_pairwise(round_)


def voting_rounds() -> list[Round]:
    """Rounds a voter can be sent to now: open or judging, with a pairwise duration class."""
    rounds = Round.objects.filter(state__in=VOTING_STATES).select_related("protocol_version")
    return [r for r in rounds.order_by("opened_at", "id") if round_is_pairwise(r)]


def voter_pseudonym(round_: Round, voter_public_id: Any) -> str:
    """The per-round pseudonym a voter has in published records: unlinkable across rounds."""
    return salted_hash(f"{round_.slug}:{voter_public_id}", purpose="voter-pseudonym")[:20]


def assignment_for_page(token: str) -> Assignment | None:
    """An assignment with what its page and media addresses need, in one query."""
    return (
        Assignment.objects.select_related(
            "voter",
            "round__protocol_version",
            "battle__run_a__proxy_file",
            "battle__run_b__proxy_file",
            "battle__run_a__entry__system_version__system",
            "battle__run_b__entry__system_version__system",
        )
        .filter(token=token)
        .first()
    )


def _later_exclusions(round_: Round) -> dict[int, list[str]]:
    reasons: dict[int, list[str]] = defaultdict(list)
    for ballot_id, reason in BallotExclusion.objects.filter(ballot__round=round_).values_list(
        "ballot_id", "reason"
    ):
        reasons[ballot_id].append(reason)
    return reasons


def effective_exclusion_reason(own: str, later: list[str]) -> str:
    """The ballot's exclusion reasons: those it was locked with plus later ones, sorted."""
    reasons = {r for r in own.split(",") if r} | set(later)
    return ",".join(sorted(reasons))


def ballots_of_round(round_: Round) -> QuerySet[Ballot]:
    return (
        Ballot.objects.filter(round=round_)
        .select_related("battle__package", "battle__run_a__entry", "battle__run_b__entry", "voter")
        .order_by("locked_at", "id")
    )


def ballot_rows(round_: Round) -> list[dict[str, Any]]:
    """One plain dict per ballot of the round, with its effective exclusion reason."""
    later = _later_exclusions(round_)
    rows = []
    for ballot in ballots_of_round(round_):
        battle = ballot.battle
        reason = effective_exclusion_reason(ballot.exclusion_reason, later.get(ballot.pk, []))
        rows.append(
            {
                "ballot_id": str(ballot.public_id),
                "voter": voter_pseudonym(round_, ballot.voter.public_id),
                "prompt": battle.package.prompt_key,
                "battle": battle.pk,
                "run_a": str(battle.run_a.public_id),
                "run_b": str(battle.run_b.public_id),
                "a": battle.run_a.entry.label,
                "b": battle.run_b.entry.label,
                "first": ballot.first,
                "choice": ballot.choice,
                "outcome": ballot.outcome,
                "excluded": bool(reason),
                "exclusion_reason": reason,
                "audio_on": ballot.audio_on,
                "synthetic": ballot.synthetic,
                "device": ballot.device,
                "expertise": ballot.expertise,
                "locked_at": ballot.locked_at,
                "sha256": ballot.sha256,
                "log_index": ballot.log_index,
            }
        )
    return rows


def ballots_frame(round_: Round, *, include_excluded: bool = False) -> pd.DataFrame:
    """The round's ballots as a DataFrame, one row per ballot (the results app's input).

    Columns (``BALLOT_COLUMNS``): ballot_id (public UUID), voter (per-round pseudonym),
    prompt (prompt key), battle, run_a / run_b (run public ids; ``run_a < run_b`` as strings,
    so a and b never depend on which film played first), a / b (the runs' entry labels),
    first ("a" or "b": which side played as Film 1), choice ("first", "second", "tie"), outcome
    ("a", "b" or "tie"), excluded, exclusion_reason ("" when the ballot counts), audio_on,
    synthetic, device, expertise, locked_at, sha256, log_index.

    Without ``include_excluded`` only ballots in the main result are returned (protocol:
    "Require audio playback for the main result"; abuse flags).
    """
    frame = pd.DataFrame(ballot_rows(round_), columns=BALLOT_COLUMNS)
    if not include_excluded:
        frame = frame[~frame["excluded"].astype(bool)].reset_index(drop=True)
    return frame


def unlocked_ballot_count(round_: Round) -> int:
    """Ballots of the round not yet committed to the transparency log (the reveal gate asks).

    ``ballot_cast`` commits each ballot to the log in the transaction that locks it, so this
    is 0 unless something wrote ballots around the service.
    """
    return Ballot.objects.filter(round=round_, log_index__isnull=True).count()


# A ballot in the main result: locked without an exclusion reason and never excluded later.
_COUNTS = Q(exclusion_reason="") & Q(exclusions__isnull=True)


def ballot_counts_by_round() -> list[dict[str, Any]]:
    """Ballots per round: total, in the main result, excluded, synthetic (admin summary)."""
    rows = list(
        Ballot.objects.values("round__slug")
        .annotate(
            total=Count("id", distinct=True),
            valid=Count("id", filter=_COUNTS, distinct=True),
            synthetic=Count("id", filter=Q(synthetic=True), distinct=True),
            voters=Count("voter", distinct=True),
        )
        .order_by("round__slug")
    )
    for row in rows:
        row["excluded"] = row["total"] - row["valid"]
    return rows


EXPORT_COLUMNS = ["ballot_id", "round", *BALLOT_COLUMNS[1:]]


def ballot_export(round_: Round) -> dict[str, Any]:
    """The deidentified ballot export of a round.

    Per ballot: the battle assignment (battle, prompt, runs and their anonymous labels), the
    side randomization (``first``), the vote result (``choice``, ``outcome``), the exclusion
    reason and the cohort flags (device, expertise, audio_on, synthetic). The only voter
    identity is a per-round pseudonym; there is no address, user agent or account. System
    identities are added only once the round's identities are revealed.
    """
    rows = []
    for row in ballot_rows(round_):
        item = {key: row[key] for key in EXPORT_COLUMNS if key in row}
        item["round"] = round_.slug
        item["locked_at"] = row["locked_at"].isoformat()
        rows.append({key: item[key] for key in EXPORT_COLUMNS})
    document: dict[str, Any] = {
        "round": round_.slug,
        "protocol": round_.protocol_version.key,
        "ballot_record_fields": round_.protocol.definition.get("ballot_record_fields", []),
        "identities_revealed": round_.identities_revealed,
        "columns": EXPORT_COLUMNS,
        "ballots": rows,
    }
    if round_.identities_revealed:
        document["systems"] = {
            entry.label: {
                "system": entry.system_version.system.name,
                "version": entry.system_version.version,
                "customer_tier": entry.system_version.customer_tier,
            }
            for entry in round_.entries.select_related("system_version__system")
        }
    return document
