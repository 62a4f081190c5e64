"""Writes of the results app: result snapshots, the judgment lock and the gated reveal.

- :func:`result_compute` snapshots the valid ballots or scorecards of one result kind, computes
  the result from exactly the exported inputs, logs both hashes (``calculation_inputs``) and
  stores an append-only :class:`~stats.models.ResultSnapshot` (issue 8: "the snapshot's inputs
  are exported and their hash logged, so anyone can recompute the published numbers").
- :func:`round_lock` moves a round from judging to locked only when every ballot and scorecard
  is locked and committed to the log.
- :func:`round_reveal` is the only way to reveal identities: a staff member with the
  ``rounds.reveal_round`` permission unlocks a locked round; the ``reveal_unlock`` entry
  publishes every label's identity and nonce so anyone can check them against the
  ``entry_commit`` commitments logged before any judgment (see
  ``stats.selectors.verify_reveal``).

Each write is one transaction that locks the round row first (STYLE.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from duel.canonical import canonical_json, canonical_sha256, sha256_hex
from ledger.services import entry_append
from rounds import services as round_services
from rounds.models import Round, identity_commitment
from stats import bootstrap as bs
from stats import results, selectors
from stats.models import ResultSnapshot

REVEAL_PERMISSION = "rounds.reveal_round"


def _locked_round(round_: Round) -> Round:
    return Round.objects.select_for_update(no_key=True).get(pk=round_.pk)


# ---------------------------------------------------------------------------------------------
# Results


def result_compute(
    *,
    round_: Round,
    result_kind: str,
    actor: str = "",
    n_replicates: int = bs.DEFAULT_REPLICATES,
) -> ResultSnapshot:
    """Snapshot the inputs of one result of a round, compute it, log and store it.

    The result is computed from the canonical JSON bytes of the inputs document, read back,
    so it depends on nothing the export does not contain. When a snapshot of the same inputs
    exists (same round, kind and inputs hash: the inputs include the method and the seed), it
    is returned unchanged: the same inputs always give the same published numbers. The heavy
    computation runs outside any transaction; the log entry and the row are written together.

    Raises ``stats.selectors.ResultUnavailable`` when the kind's source data is not available.
    """
    round_ = Round.objects.select_related("protocol_version").get(pk=round_.pk)
    if not round_.is_committed:
        raise ValidationError(f"round {round_.slug} is not committed: it has no results")
    state = round_.state
    inputs = selectors.result_inputs(round_, result_kind, n_replicates=n_replicates)
    text = canonical_json(inputs)
    inputs_sha256 = sha256_hex(text)
    existing = (
        ResultSnapshot.objects.filter(
            round=round_, result_kind=result_kind, inputs_sha256=inputs_sha256
        )
        .defer("inputs")
        .first()
    )
    if existing is not None:
        return existing
    result = results.compute_result(json.loads(text))
    result_sha256 = canonical_sha256(result)
    protocol = round_.protocol_version
    payload = {
        "round": round_.slug,
        "result_kind": result_kind,
        "format": results.INPUTS_FORMAT,
        "method": results.METHOD,
        "protocol": protocol.key,
        "protocol_sha256": protocol.sha256,
        "round_state": state,
        "seed": inputs["parameters"]["seed"],
        "n_replicates": inputs["parameters"]["n_replicates"],
        "rows": {name: len(t["rows"]) for name, t in inputs["tables"].items()},
        "inputs_sha256": inputs_sha256,
        "result_sha256": result_sha256,
        "status": result.get("status"),
        "actor": actor or "on demand",
    }
    try:
        with transaction.atomic():
            _locked_round(round_)
            entry = entry_append(
                kind="calculation_inputs",
                subject=f"round:{round_.slug}/result:{result_kind}",
                payload=payload,
            )
            return ResultSnapshot.objects.create(
                round=round_,
                result_kind=result_kind,
                protocol_key=protocol.key,
                protocol_sha256=protocol.sha256,
                round_state=state,
                method=results.METHOD,
                seed=inputs["parameters"]["seed"],
                inputs=text.decode("utf-8"),
                inputs_sha256=inputs_sha256,
                result=result,
                result_sha256=result_sha256,
                status=str(result.get("status") or ""),
                log_index=entry.index,
                computed_by=actor,
                computed_at=timezone.now(),
            )
    except IntegrityError:
        # A concurrent request stored the same inputs first; its log entry stands, ours was
        # rolled back with the refused row.
        return ResultSnapshot.objects.defer("inputs").get(
            round=round_, result_kind=result_kind, inputs_sha256=inputs_sha256
        )


@dataclass
class RoundResults:
    """The newest snapshot of each result kind of a round, and why a kind has none."""

    snapshots: dict[str, ResultSnapshot]
    unavailable: dict[str, str]


def results_ensure(*, round_: Round, actor: str = "") -> RoundResults:
    """The round's results, computing a snapshot where none matches the current inputs.

    Results of a locked or revealed round are computed once (their inputs no longer change)
    and then read from the newest snapshot. A demo round that still takes votes rebuilds its
    inputs on every call and stores a new snapshot only when they changed. A snapshot taken
    before the lock is checked once more after it.
    """
    snapshots = selectors.latest_snapshots(round_)
    unavailable: dict[str, str] = {}
    stable = not selectors.results_interim(round_)
    for kind in selectors.result_kinds_for(round_):
        current = snapshots.get(kind)
        if current is not None and stable and current.round_state in selectors.PUBLIC_RESULT_STATES:
            continue
        try:
            snapshots[kind] = result_compute(round_=round_, result_kind=kind, actor=actor)
        except selectors.ResultUnavailable as exc:
            unavailable[kind] = str(exc)
    return RoundResults(snapshots, unavailable)


def results_recompute(
    *, round_: Round, actor: str
) -> list[tuple[str, ResultSnapshot | None, bool]]:
    """Rebuild every result's inputs now (staff "recompute"): ``(kind, snapshot, created)``.

    A new snapshot is stored only for a kind whose inputs changed (e.g. a ballot excluded after
    the lock, or a new method version); otherwise the existing snapshot is returned.
    """
    before = {k: s.pk for k, s in selectors.latest_snapshots(round_).items()}
    out: list[tuple[str, ResultSnapshot | None, bool]] = []
    for kind in selectors.result_kinds_for(round_):
        try:
            snapshot = result_compute(round_=round_, result_kind=kind, actor=actor)
        except selectors.ResultUnavailable:
            out.append((kind, None, False))
            continue
        out.append((kind, snapshot, before.get(kind) != snapshot.pk))
    return out


# ---------------------------------------------------------------------------------------------
# The judgment lock and the reveal


def unlocked_judgments(round_: Round) -> dict[str, int]:
    """Ballots and scorecards of the round not yet locked and committed to the log."""
    from juries import selectors as jury_selectors
    from voting import selectors as voting_selectors

    return {
        "ballots": voting_selectors.unlocked_ballot_count(round_),
        "scorecards": jury_selectors.unlocked_scorecard_count(round_),
    }


def _unlocked_problems(round_: Round) -> list[str]:
    counts = unlocked_judgments(round_)
    return [
        f"{count} {name} of round {round_.slug} are not locked and committed to the log"
        for name, count in counts.items()
        if count
    ]


@transaction.atomic
def round_lock(*, round_: Round, actor: str) -> Round:
    """Judging ends: the round moves to ``locked`` once every judgment is locked and logged.

    Refused while any ballot or scorecard is unlocked (issue 8: "the unlock needs every ballot
    and scorecard locked and committed"). For a round with ballots, the complete ballot set is
    committed to the log (``voting.services.round_ballots_lock``) in the same transaction, so
    the results are computed from a set that cannot change without the log showing it.
    """
    from voting import services as voting_services
    from voting.selectors import round_is_pairwise

    round_ = _locked_round(round_)
    if round_.state != Round.State.JUDGING:
        raise round_services.TransitionError(
            f"round {round_.slug} is {round_.state}: only a round in judging can be locked"
        )
    problems = _unlocked_problems(round_)
    if problems:
        raise ValidationError(problems)
    if round_is_pairwise(round_) or round_.ballots.exists():
        voting_services.round_ballots_lock(round_=round_, actor=actor)
    return round_services.round_mark_locked(round_=round_, actor=actor)


def reveal_payload(round_: Round, actor: str, revealed_at) -> dict:
    """The ``reveal_unlock`` entry: per label the identity and the nonce behind its
    ``entry_commit`` commitment, and the results published at the unlock."""
    entries = round_.entries.select_related("system_version__system").order_by("label")
    snapshots = selectors.latest_snapshots(round_)
    return {
        "round": round_.slug,
        "actor": actor,
        "revealed_at": revealed_at.isoformat(),
        "entries": [
            {
                "label": e.label,
                "path": e.path,
                "identity": e.identity,
                "nonce": e.identity_nonce,
                "identity_commitment": identity_commitment(e.label, e.identity, e.identity_nonce),
                "system": e.system_version.system.name,
                "vendor": e.system_version.system.vendor,
                "version": e.system_version.version,
                "customer_tier": e.system_version.customer_tier,
            }
            for e in entries
        ],
        "results": [
            {
                "result_kind": kind,
                "inputs_sha256": s.inputs_sha256,
                "result_sha256": s.result_sha256,
                "log_index": s.log_index,
            }
            for kind, s in sorted(snapshots.items())
        ],
    }


@transaction.atomic
def round_reveal(*, round_: Round, user) -> Round:
    """Unlock the identities of a locked round (the explicit, permission-gated, logged unlock).

    ``user`` needs the ``rounds.reveal_round`` permission; the round must be ``locked`` and
    every ballot and scorecard locked and committed. Sets the state to ``revealed`` and
    ``revealed_at``, and logs ``reveal_unlock`` (identities and nonces) and the transition.
    """
    if not (user is not None and user.is_active and user.has_perm(REVEAL_PERMISSION)):
        raise PermissionDenied(f"revealing identities needs the {REVEAL_PERMISSION} permission")
    round_ = _locked_round(round_)
    if round_.state != Round.State.LOCKED:
        raise round_services.TransitionError(
            f"round {round_.slug} is {round_.state}: only a locked round can be revealed "
            "(lock its judgments first)"
        )
    problems = _unlocked_problems(round_)
    if problems:
        raise ValidationError(problems)
    actor = user.get_username()
    now = timezone.now()
    payload = reveal_payload(round_, actor, now)
    round_.state = Round.State.REVEALED
    round_.revealed_at = now
    round_.save(update_fields=["state", "revealed_at"])
    subject = f"round:{round_.slug}"
    entry_append(kind="reveal_unlock", subject=subject, payload=payload)
    entry_append(
        kind="round_transition",
        subject=subject,
        payload={"from": Round.State.LOCKED, "to": Round.State.REVEALED, "actor": actor},
    )
    return round_
