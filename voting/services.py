"""Writes of the voting app: voters, battles, assignments, heartbeats and ballots.

Protocol "One-minute and two-minute voting": blind pairwise voting, playback order randomized
per voter, at least 95 percent watch coverage of both outputs, both endings played, audio on
for the main result, the vote locked before anything about the systems is shown. Protocol
"Transparency log": every ballot's deidentified record is hashed and appended to the log in
the transaction that locks it; an exclusion found later is a superseding correction.

Each service is keyword-only, one transaction, and locks the rows it starts from
(``select_for_update(no_key=True)``). Lock order, the same everywhere so no two services
deadlock: round (a share lock for ballots) -> voter -> playback sessions (film 1, film 2) ->
the log head (inside ``ledger.services.entry_append``). No ffprobe runs inside a transaction:
``battle_sync`` measures the proxies first, then writes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import secrets
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import combinations
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Q
from django.utils import timezone

from duel.canonical import canonical_sha256
from ledger.services import entry_append
from rounds.models import Round, Run
from rounds.selectors import rankable_runs
from rounds.services import salted_hash
from voting import playback
from voting.cohorts import DEVICE_CLASSES, EXPERTISE_VALUES, device_class, network_of
from voting.models import (
    Assignment,
    Ballot,
    BallotExclusion,
    Battle,
    Choice,
    Heartbeat,
    PlaybackSession,
    Voter,
)
from voting.selectors import (
    round_accepts_ballots,
    round_is_pairwise,
    voter_pseudonym,
    voting_rounds,
    voting_settings,
    watch_rules,
)

# An assignment without a ballot still counts as exposure for this long (so concurrent voters
# spread over the pairs), and a voter coming back within it resumes the same pair.
OPEN_ASSIGNMENT_WINDOW = timedelta(minutes=30)
# Identical-timing detection needs enough heartbeats to be meaningful.
MIN_HEARTBEATS_FOR_FINGERPRINT = 6

# Exclusion reasons (published in the ballot record and the export).
AUDIO_OFF = "audio_off"
IMPOSSIBLE_SPEED = playback.IMPOSSIBLE_SPEED
NETWORK_CROWD = "network_crowd"
IDENTICAL_TIMING = "identical_timing"
EXCLUDING_FLAGS = frozenset({AUDIO_OFF, IMPOSSIBLE_SPEED, NETWORK_CROWD, IDENTICAL_TIMING})
SYNTHETIC = "synthetic"


# ---------------------------------------------------------------------------------------------
# Errors: each carries the HTTP status and a short code the pages and API answer with.


class VotingError(ValidationError):
    status = 400
    code_name = "invalid"

    def __init__(self, message: str, *, code: str | None = None, extra: dict | None = None):
        super().__init__(message)
        self.detail = message
        if code:
            self.code_name = code
        self.extra = extra or {}


class NotFound(VotingError):
    status = 404
    code_name = "not_found"


class Forbidden(VotingError):
    """Wrong voter, or a signature that does not match (a tampered request)."""

    status = 403
    code_name = "forbidden"


class Conflict(VotingError):
    """Replayed, already voted, round closed, cap reached, or a heartbeat the rules refuse."""

    status = 409
    code_name = "conflict"


class NotWatched(VotingError):
    """A ballot before both films were watched to the end."""

    status = 422
    code_name = "not_watched"


class NothingToAssign(VotingError):
    status = 404
    code_name = "nothing_to_assign"


# ---------------------------------------------------------------------------------------------
# Voters


def network_hash_of(address: str) -> str:
    """Salted hash of the /24 (IPv4) or /48 (IPv6) network of ``address``; "" if unknown."""
    network = network_of(address or "")
    return salted_hash(network, purpose="voter-network") if network else ""


@transaction.atomic
def voter_create(
    *,
    network_hash: str = "",
    user_agent: str = "",
    user=None,
    expertise: str = "",
    synthetic: bool = False,
    device: str | None = None,
) -> Voter:
    """A new pseudonymous voter. Only the device class of ``user_agent`` is kept (or
    ``device``, a class given directly, for simulated voters)."""
    if expertise not in EXPERTISE_VALUES:
        raise VotingError(f"unknown expertise {expertise!r}")
    if device is not None and device not in DEVICE_CLASSES:
        raise VotingError(f"unknown device class {device!r}")
    return Voter.objects.create(
        user=user if user is not None and user.is_authenticated else None,
        expertise=expertise,
        device=device or device_class(user_agent),
        network_hash=network_hash,
        synthetic=synthetic,
    )


@transaction.atomic
def voter_update_cohort(*, voter: Voter, expertise: str) -> Voter:
    """Record the voter's self-declared expertise (a cohort flag copied into later ballots)."""
    if expertise not in EXPERTISE_VALUES:
        raise VotingError(f"unknown expertise {expertise!r}")
    voter = Voter.objects.select_for_update(no_key=True).get(pk=voter.pk)
    if voter.expertise != expertise:
        voter.expertise = expertise
        voter.save(update_fields=["expertise"])
    return voter


@transaction.atomic
def voter_link_user(*, voter: Voter, user) -> Voter:
    """Link a signed-in user to the pseudonymous voter (optional sign-in)."""
    voter = Voter.objects.select_for_update(no_key=True).get(pk=voter.pk)
    if voter.user_id is None and not Voter.objects.filter(user=user).exists():
        voter.user = user
        voter.save(update_fields=["user"])
    return voter


# ---------------------------------------------------------------------------------------------
# Battles


def proxy_duration_s(media_file) -> float:
    """The proxy's duration in seconds, measured with ffprobe (streams the file to a temporary
    copy when storage has no local path, e.g. S3)."""
    from django.core.files.storage import default_storage

    from media_pipeline.probe import probe_file

    def measure(path: str) -> float:
        report = probe_file(path, ffprobe=settings.DUEL_FFPROBE)
        candidates = [report.duration_s] + [
            s.duration_s for s in (*report.video_streams, *report.audio_streams)
        ]
        durations = [d for d in candidates if d]
        if not durations:
            raise VotingError(f"the proxy {media_file.pk} has no measurable duration")
        return float(report.duration_s or max(durations))

    try:
        return measure(default_storage.path(media_file.storage_name))
    except NotImplementedError:
        pass
    from media_pipeline.storage import work_dir

    with tempfile.NamedTemporaryFile(dir=work_dir(), prefix="measure-", suffix=".mp4") as copy:
        with default_storage.open(media_file.storage_name, "rb") as source:
            shutil.copyfileobj(source, copy, length=1024 * 1024)
        copy.flush()
        return measure(copy.name)


def _pairs(round_: Round) -> list[tuple[Run, Run]]:
    """Every pair of rankable runs on the same prompt from different entries, canonical order.

    Same round, duration class and prompt track by construction (they are the round's), same
    prompt because they share the input package.
    """
    by_package: dict[int, list[Run]] = {}
    for run in rankable_runs(round_):
        by_package.setdefault(run.package_id, []).append(run)
    pairs = []
    for runs in by_package.values():
        for x, y in combinations(runs, 2):
            if x.entry_id == y.entry_id:
                continue
            a, b = sorted((x, y), key=lambda r: str(r.public_id))
            pairs.append((a, b))
    return pairs


def battle_sync(*, round_: Round, measure=proxy_duration_s) -> list[Battle]:
    """Create the battles of every new pair of rankable outputs; return the new battles.

    Idempotent: existing pairs are skipped (and the database's unique pair refuses a
    duplicate from a concurrent call). Proxies are measured before the transaction opens.
    """
    if not round_is_pairwise(round_):
        raise VotingError(
            f"round {round_.slug} ({round_.duration_class}) is not judged by pairwise votes"
        )
    existing = set(
        Battle.objects.filter(round=round_).values_list("run_a_id", "run_b_id").iterator()
    )
    missing = [(a, b) for a, b in _pairs(round_) if (a.pk, b.pk) not in existing]
    if not missing:
        return []
    # A run already in a battle was measured then: each proxy is probed once.
    durations: dict[int, float] = {}
    for run_a, run_b, duration_a, duration_b in Battle.objects.filter(round=round_).values_list(
        "run_a_id", "run_b_id", "duration_a_s", "duration_b_s"
    ):
        durations[run_a], durations[run_b] = duration_a, duration_b
    for pair in missing:
        for run in pair:
            if run.pk not in durations:
                durations[run.pk] = measure(run.proxy_file)
    return _battles_create(round_=round_, pairs=missing, durations=durations)


@transaction.atomic
def _battles_create(
    *, round_: Round, pairs: list[tuple[Run, Run]], durations: dict[int, float]
) -> list[Battle]:
    round_ = Round.objects.select_for_update(no_key=True).get(pk=round_.pk)
    created = []
    for a, b in pairs:
        try:
            with transaction.atomic():
                created.append(
                    Battle.objects.create(
                        round=round_,
                        package_id=a.package_id,
                        duration_class=round_.duration_class,
                        prompt_track=round_.prompt_track,
                        run_a=a,
                        run_b=b,
                        duration_a_s=durations[a.pk],
                        duration_b_s=durations[b.pk],
                    )
                )
        except IntegrityError:
            continue  # created concurrently
    return created


def battles_stale(round_: Round) -> bool:
    """The round has rankable pairs without a battle (cheap check before ``battle_sync``)."""
    existing = Battle.objects.filter(round=round_).count()
    return len(_pairs(round_)) > existing


# ---------------------------------------------------------------------------------------------
# Assignments


def _least_exposed(battles: list[Battle], rng: random.Random) -> Battle:
    """The least-voted pairs first, with randomness among equals (issue 6)."""
    low = min(b.exposure for b in battles)
    return rng.choice([b for b in battles if b.exposure == low])


def _first_side(battle: Battle, rng: random.Random) -> str:
    """Which side plays first: the one that played first less often, at random when equal."""
    counts = dict(
        Assignment.objects.filter(battle=battle)
        .values_list("first")
        .annotate(n=Count("id"))
        .values_list("first", "n")
    )
    a, b = counts.get("a", 0), counts.get("b", 0)
    if a == b:
        return rng.choice(["a", "b"])
    return "a" if a < b else "b"


def _open_assignment(voter: Voter, round_: Round) -> Assignment | None:
    cutoff = timezone.now() - OPEN_ASSIGNMENT_WINDOW
    return (
        Assignment.objects.filter(
            voter=voter, round=round_, created_at__gte=cutoff, ballot__isnull=True
        )
        .order_by("-created_at")
        .first()
    )


@transaction.atomic
def assignment_next(
    *,
    voter: Voter,
    round_: Round | None = None,
    rng: random.Random | None = None,
    resume: bool = True,
) -> Assignment:
    """The next pair for this voter: resume an open one, or assign a new battle.

    Looks in ``round_`` or in every round accepting votes. Never a pair the voter already had
    (also a unique constraint), never beyond the round's cap of ballots per voter. Exposure =
    ballots + assignments still open; the least exposed battles come first, chosen at random
    among equals; the side that plays first is counterbalanced per battle. Raises
    :class:`NothingToAssign` when there is nothing left for this voter.
    """
    rng = rng or random.SystemRandom()
    voter = Voter.objects.select_for_update(no_key=True).get(pk=voter.pk)
    rounds = [round_] if round_ is not None else voting_rounds()
    capped = False
    for candidate in rounds:
        if not round_accepts_ballots(candidate):
            continue
        cap = int(voting_settings(candidate)["ballots_per_voter"])
        if Ballot.objects.filter(round=candidate, voter=voter).count() >= cap:
            capped = True
            continue
        if resume:
            open_one = _open_assignment(voter, candidate)
            if open_one is not None:
                return open_one
        cutoff = timezone.now() - OPEN_ASSIGNMENT_WINDOW
        battles = list(
            Battle.objects.filter(round=candidate)
            .exclude(assignments__voter=voter)
            .annotate(
                ballot_count=Count("ballots", distinct=True),
                open_count=Count(
                    "assignments",
                    filter=Q(assignments__created_at__gte=cutoff, assignments__ballot__isnull=True),
                    distinct=True,
                ),
            )
            .order_by("id")
        )
        if not battles:
            continue
        for battle in battles:
            battle.exposure = battle.ballot_count + battle.open_count
        battle = _least_exposed(battles, rng)
        first = _first_side(battle, rng)
        assignment = Assignment.objects.create(
            token=secrets.token_urlsafe(32),
            voter=voter,
            battle=battle,
            round=candidate,
            first=first,
            hmac_key=secrets.token_hex(32),
        )
        second = "b" if first == "a" else "a"
        PlaybackSession.objects.bulk_create(
            [
                PlaybackSession(
                    assignment=assignment, film=1, duration_s=battle.duration_for(first)
                ),
                PlaybackSession(
                    assignment=assignment, film=2, duration_s=battle.duration_for(second)
                ),
            ]
        )
        return assignment
    if capped:
        raise NothingToAssign(
            "You have reached this round's limit of votes per voter. Thank you!", code="cap"
        )
    raise NothingToAssign("There is no new pair of films for you to compare right now.")


# ---------------------------------------------------------------------------------------------
# Heartbeats: the playback proof


def signature_for(key_hex: str, body: bytes) -> str:
    """Hex HMAC-SHA256 of the exact request body with the assignment's key."""
    return hmac.new(bytes.fromhex(key_hex), body, hashlib.sha256).hexdigest()


def _verified_document(assignment: Assignment, body: bytes, signature: str) -> dict[str, Any]:
    expected = signature_for(assignment.hmac_key, body)
    if not hmac.compare_digest(expected, (signature or "").strip().lower()):
        raise Forbidden(
            "The request's signature does not match: it was changed on the way or not sent "
            "by this page.",
            code="bad_signature",
        )
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise VotingError("The request body is not JSON.", code="malformed") from None
    if not isinstance(document, dict) or document.get("token") != assignment.token:
        raise VotingError("The request does not name this assignment.", code="malformed")
    return document


_BALLOT_RELATED = (
    "voter",
    "round__protocol_version",
    "battle__package",
    "battle__run_a__entry",
    "battle__run_b__entry",
)


def _assignment_for_ballot():
    return Assignment.objects.select_related(*_BALLOT_RELATED)


def _owned(token: str, voter_id: str | None) -> Assignment:
    """The assignment, checked to belong to the voter whose public id the request carries."""
    assignment = _assignment_for_ballot().filter(token=token).first()
    if assignment is None:
        raise NotFound("No such pair of films.")
    if not voter_id or str(assignment.voter.public_id) != str(voter_id):
        raise Forbidden("This pair of films was given to someone else.", code="wrong_voter")
    return assignment


def _state(session: PlaybackSession) -> playback.FilmState:
    return playback.FilmState(
        duration_s=session.duration_s,
        started_at=session.started_at.timestamp() if session.started_at else None,
        last_at=session.last_heartbeat_at.timestamp() if session.last_heartbeat_at else None,
        played=tuple(tuple(x) for x in session.played),
        audible=tuple(tuple(x) for x in session.audible),
        ended=session.ended,
    )


def film_status(session: PlaybackSession, rules: playback.WatchRules) -> dict[str, Any]:
    """What the page may show about one film's progress (nothing about the system)."""
    state = _state(session)
    return {
        "coverage": round(state.coverage, 4),
        "audible": round(state.audible_coverage, 4),
        "ending": state.ending_played(rules),
        "complete": state.complete(rules),
        "heard": state.heard(rules),
    }


def playback_status(sessions: list[PlaybackSession], rules: playback.WatchRules) -> dict[str, Any]:
    """Both films' progress and whether the server agrees the voter may vote."""
    films = {str(s.film): film_status(s, rules) for s in sessions}
    ready = len(films) == 2 and all(f["complete"] for f in films.values())
    return {
        "films": films,
        "ready_to_vote": ready,
        "audio_on": all(f["heard"] for f in films.values()),
        "min_coverage": rules.min_coverage,
    }


def _locked_sessions(assignment: Assignment) -> list[PlaybackSession]:
    return list(
        PlaybackSession.objects.select_for_update(no_key=True)
        .filter(assignment=assignment)
        .order_by("film")
    )


@dataclass
class HeartbeatResult:
    accepted: bool
    refusal: str = ""
    detail: str = ""
    status: dict[str, Any] = field(default_factory=dict)


@transaction.atomic
def heartbeat_record(
    *,
    token: str,
    voter_id: str | None,
    body: bytes,
    signature: str,
    now: datetime | None = None,
) -> HeartbeatResult:
    """Check one signed heartbeat on the server's clock; store it; return the verdict.

    ``voter_id`` is the public id of the voter making the request (from the signed cookie).
    Raises :class:`Forbidden` (wrong voter, tampered body), :class:`VotingError` (malformed),
    :class:`Conflict` (replayed sequence number, already voted). A heartbeat the watching rules
    refuse (``voting.playback``) is stored with its refusal and answered as a refusal: its
    ranges do not count.
    """
    # One query locks both films' sessions and brings the assignment, its voter and round: the
    # hot path of the playback proof. The owner and signature are checked before anything is
    # written; a refusal rolls the transaction (and the lock) back.
    sessions = list(
        PlaybackSession.objects.select_for_update(no_key=True, of=("self",))
        .select_related("assignment__voter", "assignment__round__protocol_version")
        .filter(assignment__token=token)
        .order_by("film")
    )
    if len(sessions) != 2:
        raise NotFound("No such pair of films.")
    assignment = sessions[0].assignment
    if not voter_id or str(assignment.voter.public_id) != str(voter_id):
        raise Forbidden("This pair of films was given to someone else.", code="wrong_voter")
    document = _verified_document(assignment, body, signature)
    try:
        report = playback.parse_heartbeat(document)
    except playback.HeartbeatInvalid as exc:
        raise VotingError(str(exc), code="malformed") from None
    rules = watch_rules(assignment.round)
    session = sessions[report.film - 1]
    other = sessions[2 - report.film]
    if session.closed:
        raise Conflict("The vote for this pair is already locked.", code="already_voted")
    last_seq = max(s.last_seq for s in sessions)
    if report.seq <= last_seq:
        raise Conflict(f"Heartbeat {report.seq} was already received (replayed).", code="replayed")
    moment = now or timezone.now()
    other_state = _state(other)
    try:
        verdict = playback.apply_heartbeat(
            _state(session),
            report,
            now=moment.timestamp(),
            rules=rules,
            other_film_watched_s=other_state.watched_s,
            pair_started_at=other_state.started_at,
        )
    except playback.HeartbeatInvalid as exc:
        raise VotingError(str(exc), code="malformed") from None
    # Both sessions are locked, so a concurrent copy of this heartbeat waits and then sees the
    # new last_seq; the unique (assignment, seq) constraint is the database's backstop.
    try:
        Heartbeat.objects.create(
            assignment=assignment,
            film=report.film,
            seq=report.seq,
            received_at=moment,
            body=body.decode("utf-8"),
            signature=signature.strip().lower(),
            accepted=verdict.accepted,
            refusal=verdict.refusal or "",
        )
    except IntegrityError:
        raise Conflict(
            f"Heartbeat {report.seq} was already received (replayed).", code="replayed"
        ) from None

    new = verdict.state
    session.last_seq = report.seq
    session.heartbeats += 1
    if session.started_at is None and new.started_at is not None:
        session.started_at = datetime.fromtimestamp(new.started_at, tz=moment.tzinfo)
    update = ["last_seq", "heartbeats", "started_at"]
    if verdict.accepted:
        session.last_heartbeat_at = moment
        session.played = [list(x) for x in new.played]
        session.audible = [list(x) for x in new.audible]
        session.watched_s = new.watched_s
        session.audible_s = new.audible_s
        session.ended = new.ended
        session.timing_hash = playback.timing_step(
            session.timing_hash, report, session.last_client_ms
        )
        session.last_client_ms = report.client_ms
        update += [
            "last_heartbeat_at",
            "played",
            "audible",
            "watched_s",
            "audible_s",
            "ended",
            "timing_hash",
            "last_client_ms",
        ]
    else:
        refusals = dict(session.refusals)
        refusals[verdict.refusal] = refusals.get(verdict.refusal, 0) + 1
        session.refusals = refusals
        update.append("refusals")
        if verdict.flags and verdict.refusal not in session.flags:
            session.flags = [*session.flags, verdict.refusal]
            update.append("flags")
    session.save(update_fields=update)
    return HeartbeatResult(
        accepted=verdict.accepted,
        refusal=verdict.refusal or "",
        detail=verdict.detail,
        status=playback_status(sessions, rules),
    )


# ---------------------------------------------------------------------------------------------
# Ballots


def _outcome(choice: str, first: str) -> str:
    if choice == Choice.TIE:
        return "tie"
    if choice == Choice.FIRST:
        return first
    return "b" if first == "a" else "a"


def _timing_fingerprint(sessions: list[PlaybackSession]) -> str:
    if sum(s.heartbeats for s in sessions) < MIN_HEARTBEATS_FOR_FINGERPRINT:
        return ""
    joined = "|".join(s.timing_hash for s in sessions)
    return hashlib.sha256(joined.encode()).hexdigest()


def _exclude_later(ballot: Ballot, reason: str, detail: str) -> None:
    """Mark an already locked ballot excluded: a new row and a superseding log entry."""
    if BallotExclusion.objects.filter(ballot=ballot, reason=reason).exists():
        return
    if reason in ballot.exclusion_reason.split(","):
        return
    entry = entry_append(
        kind="correction",
        subject=f"round:{ballot.round.slug}",
        payload={
            "ballot": str(ballot.public_id),
            "ballot_sha256": ballot.sha256,
            "exclusion_reason": reason,
            "detail": detail,
        },
        supersedes=ballot.log_index,
    )
    BallotExclusion.objects.create(
        ballot=ballot, reason=reason, detail=detail, log_index=entry.index
    )


def _abuse_flags(
    round_: Round, voter: Voter, network_hash: str, fingerprint: str, max_voters: int
) -> list[str]:
    """Flags for patterns of abuse; earlier ballots caught by the same pattern are excluded
    by superseding corrections, so nothing is dropped and nothing is edited."""
    flags = []
    if network_hash:
        others = (
            Ballot.objects.filter(round=round_, network_hash=network_hash)
            .exclude(voter=voter)
            .values("voter")
            .distinct()
            .count()
        )
        if others + 1 > max_voters:
            flags.append(NETWORK_CROWD)
            if others == max_voters:  # this voter crossed the line: flag those before it
                for earlier in Ballot.objects.filter(
                    round=round_, network_hash=network_hash
                ).select_related("round"):
                    _exclude_later(
                        earlier, NETWORK_CROWD, f"more than {max_voters} voters from one network"
                    )
    if fingerprint:
        matches = list(
            Ballot.objects.filter(round=round_, timing_fingerprint=fingerprint)
            .exclude(voter=voter)
            .select_related("round")
        )
        if matches:
            flags.append(IDENTICAL_TIMING)
            for earlier in matches:
                _exclude_later(
                    earlier, IDENTICAL_TIMING, "heartbeat timing identical to another voter's"
                )
    return flags


def _round_shared(pk: int) -> Round:
    """The round, locked FOR SHARE until the ballot's transaction ends.

    A share lock, not ``select_for_update``: ballots of one round must not wait for each
    other (the log head already orders them), but a round transition (``FOR NO KEY UPDATE``,
    e.g. ``stats.services.round_lock``) waits for the ballots in flight, and a ballot that
    arrives after it sees the new state. SQLite serializes writers anyway.
    """
    if connection.vendor == "postgresql":
        sql = f"SELECT * FROM {Round._meta.db_table} WHERE id = %s FOR SHARE"
        round_ = next(iter(Round.objects.raw(sql, [pk])), None)
        if round_ is None:
            raise Round.DoesNotExist(pk)
        return round_
    return Round.objects.get(pk=pk)


@transaction.atomic
def ballot_cast(
    *,
    assignment: Assignment,
    choice: str,
    network_hash: str = "",
    synthetic: bool = False,
) -> Ballot:
    """Lock the voter's choice for an assignment and commit it to the transparency log.

    Accepted only while the round takes votes, within the voter's cap, with a tie only where
    the round allows it, and (for a real ballot) with both films watched: coverage and ending
    as the protocol requires. A ballot without sound, or caught by an abuse pattern, is kept
    with an exclusion reason and left out of the main result. ``synthetic`` ballots skip the
    playback proof and exist only in demo rounds (refused here and by the database).
    """
    return _cast(
        _assignment_for_ballot().get(pk=assignment.pk),
        choice=choice,
        network_hash=network_hash,
        synthetic=synthetic,
    )


def _cast(assignment: Assignment, *, choice: str, network_hash: str, synthetic: bool) -> Ballot:
    """:func:`ballot_cast` on an assignment loaded with its battle, runs and round.

    Assignments are append-only, so the loaded one is current; the round, the voter and the
    playback sessions are read again here, under lock. Runs inside the caller's transaction.
    """
    round_ = _round_shared(assignment.round_id)
    # The protocol version is frozen once the round is committed: reuse the loaded one.
    round_.protocol_version = assignment.round.protocol_version
    if not round_accepts_ballots(round_):
        raise Conflict(f"Round {round_.slug} is not taking votes now.", code="round_closed")
    voter = Voter.objects.select_for_update(no_key=True).get(pk=assignment.voter_id)
    settings_ = voting_settings(round_)
    if choice not in Choice.values:
        raise VotingError(f"unknown choice {choice!r}", code="malformed")
    if choice == Choice.TIE and not settings_["allow_ties"]:
        raise VotingError("This round does not allow a tie: choose Film 1 or Film 2.", code="tie")
    sessions = _locked_sessions(assignment)
    if any(s.closed for s in sessions):  # closed in the transaction that locked the ballot
        raise Conflict("The vote for this pair is already locked.", code="already_voted")
    cap = int(settings_["ballots_per_voter"])
    if Ballot.objects.filter(round=round_, voter=voter).count() >= cap:
        raise Conflict(f"You have reached this round's limit of {cap} votes per voter.", code="cap")
    rules = watch_rules(round_)
    flags: list[str] = []
    coverage = {"first": None, "second": None}
    fingerprint = ""
    if synthetic:
        if not (round_.is_demo and voter.synthetic):
            raise VotingError(
                "Synthetic ballots exist only in demo rounds, from simulated voters.",
                code="synthetic_refused",
            )
        audio_on = True
        flags.append(SYNTHETIC)
    else:
        if voter.synthetic:
            raise Forbidden("A simulated voter cannot cast a real ballot.", code="synthetic")
        states = [_state(s) for s in sessions]
        missing = [
            f"Film {i}" for i, state in enumerate(states, start=1) if not state.complete(rules)
        ]
        if missing:
            raise NotWatched(
                f"{' and '.join(missing)} must be watched to the end (at least "
                f"{rules.min_coverage:.0%} of it) before you vote.",
                extra={"status": playback_status(sessions, rules)},
            )
        coverage = {"first": round(states[0].coverage, 4), "second": round(states[1].coverage, 4)}
        audio_on = all(state.heard(rules) for state in states)
        if not audio_on:
            flags.append(AUDIO_OFF)
        for session in sessions:
            flags.extend(f for f in session.flags if f in EXCLUDING_FLAGS)
        fingerprint = _timing_fingerprint(sessions)
        flags.extend(
            _abuse_flags(
                round_,
                voter,
                network_hash,
                fingerprint,
                int(settings_["max_voters_per_network"]),
            )
        )
    flags = sorted(set(flags))
    exclusion_reason = ",".join(f for f in flags if f in EXCLUDING_FLAGS)
    battle = assignment.battle
    outcome = _outcome(choice, assignment.first)
    chosen = None if outcome == "tie" else battle.run_for(outcome)
    locked_at = timezone.now()
    public_id = str(uuid.uuid4())
    record = {
        "ballot": public_id,
        "round": round_.slug,
        "protocol": round_.protocol_version.key,
        "battle": battle.pk,
        "prompt": battle.package.prompt_key,
        "run_a": str(battle.run_a.public_id),
        "run_b": str(battle.run_b.public_id),
        "a": battle.run_a.entry.label,
        "b": battle.run_b.entry.label,
        "first": assignment.first,
        "choice": choice,
        "outcome": outcome,
        "exclusion_reason": exclusion_reason,
        "flags": flags,
        "audio_on": audio_on,
        "synthetic": synthetic,
        "coverage": coverage,
        "cohort": {"device": voter.device, "expertise": voter.expertise},
        "voter": voter_pseudonym(round_, voter.public_id),
        "assigned_at": assignment.created_at.isoformat(),
        "locked_at": locked_at.isoformat(),
    }
    sha256 = canonical_sha256(record)
    entry = entry_append(
        kind="ballot",
        subject=f"round:{round_.slug}",
        payload={"record": record, "sha256": sha256},
    )
    try:
        ballot = Ballot.objects.create(
            public_id=public_id,
            assignment=assignment,
            round=round_,
            battle=battle,
            voter=voter,
            choice=choice,
            chosen_run=chosen,
            outcome=outcome,
            first=assignment.first,
            audio_on=audio_on,
            synthetic=synthetic,
            exclusion_reason=exclusion_reason,
            flags=flags,
            coverage_first=coverage["first"],
            coverage_second=coverage["second"],
            device=voter.device,
            expertise=voter.expertise,
            network_hash=network_hash,
            timing_fingerprint=fingerprint,
            record=record,
            sha256=sha256,
            log_index=entry.index,
            locked_at=locked_at,
        )
    except IntegrityError as exc:
        # The transaction is rolled back (the log entry with it); a second ballot for this
        # assignment cannot get here (its sessions are locked and closed), so this is a
        # database rule such as the synthetic-only-in-demo trigger.
        raise VotingError(
            f"refused by the database: {str(exc).splitlines()[0]}", code="refused"
        ) from exc
    PlaybackSession.objects.filter(pk__in=[s.pk for s in sessions]).update(closed=True)
    return ballot


@transaction.atomic
def ballot_cast_signed(
    *, token: str, voter_id: str | None, body: bytes, signature: str, network_hash: str = ""
) -> Ballot:
    """The page's ballot: verify the assignment's owner and HMAC, then cast it as
    :func:`ballot_cast` does (``voter_id``: the requesting voter's public id)."""
    assignment = _owned(token, voter_id)
    document = _verified_document(assignment, body, signature)
    choice = document.get("choice")
    if not isinstance(choice, str):
        raise VotingError("'choice' must be first, second or tie.", code="malformed")
    return _cast(assignment, choice=choice, network_hash=network_hash, synthetic=False)


@transaction.atomic
def round_ballots_lock(*, round_: Round, actor: str) -> dict[str, Any]:
    """Commit the round's complete ballot set to the log (kind ``ballot_lock``).

    Call it when judging ends, before results or the reveal: the entry commits the number of
    ballots and the SHA-256 over the ordered list of (ballot id, ballot hash, exclusion
    reasons including later ones), so the set the results are computed from cannot change
    afterwards without the log showing it. Returns the committed payload.
    """
    from voting.selectors import _later_exclusions, effective_exclusion_reason

    round_ = Round.objects.select_for_update(no_key=True).get(pk=round_.pk)
    later = _later_exclusions(round_)
    items = [
        [str(public_id), sha, effective_exclusion_reason(reason, later.get(pk, []))]
        for pk, public_id, sha, reason in Ballot.objects.filter(round=round_)
        .order_by("log_index", "id")
        .values_list("pk", "public_id", "sha256", "exclusion_reason")
    ]
    payload = {
        "round": round_.slug,
        "ballots": len(items),
        "valid": sum(1 for item in items if not item[2]),
        "ballots_sha256": canonical_sha256(items),
        "actor": actor,
    }
    entry_append(kind="ballot_lock", subject=f"round:{round_.slug}", payload=payload)
    return payload
