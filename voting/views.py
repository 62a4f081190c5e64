"""The blind pairwise voting pages, their JSON endpoints, the voters' media, the export.

Thin views (STYLE.md): parse the request, call one service, render. Blindness (DESIGN.md:
"Voters and jurors see only opaque ids, proxies with stripped metadata, randomized sides"):
nothing here puts a system name, run id, entry label, file name or storage name in a page, a
header or a JSON answer before the vote is locked; both films are served by the same view,
from the same kind of address, with the same headers.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core import signing
from django.core.files.storage import default_storage
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    JsonResponse,
    StreamingHttpResponse,
)
from django.middleware.csrf import CsrfViewMiddleware, get_token
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from rounds.models import Round
from rounds.protocols import Protocol
from voting import limits, selectors, services
from voting.cohorts import EXPERTISE_CHOICES, client_address
from voting.models import Ballot, PlaybackSession, Voter
from voting.playback import MIN_AUDIBLE_VOLUME

VOTER_COOKIE = "duel_voter"
VOTER_COOKIE_SALT = "duel.voting.voter"
VOTER_COOKIE_MAX_AGE = 365 * 24 * 3600
MEDIA_CHUNK = 256 * 1024
# Both films go out with exactly these headers (plus the byte counts), whatever the stored
# file's metadata says.
MEDIA_CONTENT_TYPE = "video/mp4"
MEDIA_HEADERS = {
    "Accept-Ranges": "bytes",
    "Cache-Control": "private, no-transform, max-age=3600",
    "X-Content-Type-Options": "nosniff",
    "Content-Disposition": "inline",
}


# ---------------------------------------------------------------------------------------------
# The voter behind a request


def network_hash(request: HttpRequest) -> str:
    """Salted hash of the client's /24 or /48 network (the address itself is not kept)."""
    address = client_address(
        request.META.get("REMOTE_ADDR", ""),
        request.META.get("HTTP_X_FORWARDED_FOR", ""),
        int(getattr(settings, "DUEL_TRUSTED_PROXY_HOPS", 0)),
    )
    return services.network_hash_of(address)


def voter_id_from_cookie(request: HttpRequest) -> str | None:
    """The voter's public id from the signed cookie (no query: the hot endpoints use it)."""
    try:
        return request.get_signed_cookie(VOTER_COOKIE, salt=VOTER_COOKIE_SALT)
    except (KeyError, signing.BadSignature):
        return None


def current_voter(request: HttpRequest) -> Voter | None:
    """The voter of the signed cookie (or of the signed-in user), if any."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        linked = Voter.objects.filter(user=user).first()
        if linked is not None:
            return linked
    public_id = voter_id_from_cookie(request)
    if public_id is None:
        return None
    voter = Voter.objects.filter(public_id=public_id, synthetic=False).first()
    if voter is not None and user is not None and user.is_authenticated and not voter.user_id:
        voter = services.voter_link_user(voter=voter, user=user)
    return voter


def _remember(response: HttpResponse, voter: Voter) -> HttpResponse:
    response.set_signed_cookie(
        VOTER_COOKIE,
        str(voter.public_id),
        salt=VOTER_COOKIE_SALT,
        max_age=VOTER_COOKIE_MAX_AGE,
        httponly=True,
        samesite="Lax",
        secure=getattr(settings, "SESSION_COOKIE_SECURE", False),
    )
    return response


# ---------------------------------------------------------------------------------------------
# JSON answers


def _error(http_status: int, code: str, detail: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": code, "detail": detail, **extra}, status=http_status)


def _service_error(exc: services.VotingError) -> JsonResponse:
    return _error(exc.status, exc.code_name, exc.detail, **exc.extra)


def _limited(exc: limits.Limited) -> JsonResponse:
    response = _error(429, "rate_limited", str(exc))
    response["Retry-After"] = str(exc.retry_after)
    return response


class _JsonCsrfCheck(CsrfViewMiddleware):
    """Django's CSRF check, answering a failure as a JSON 403 the page can show."""

    def _reject(self, request: HttpRequest, reason: str) -> JsonResponse:
        return _error(403, "csrf", f"The CSRF check failed ({reason}). Reload the page.")


def _csrf_refusal(request: HttpRequest) -> HttpResponse | None:
    return _JsonCsrfCheck(lambda r: HttpResponse()).process_view(request, None, (), {})


# ---------------------------------------------------------------------------------------------
# Pages


def _rules_context(round_: Round | None) -> dict[str, Any]:
    if round_ is not None:
        rules = selectors.watch_rules(round_)
        return {
            "min_coverage_percent": round(rules.min_coverage * 100),
            "require_audio": rules.require_audio,
        }
    # Before a round is chosen, the rules of the protocol that defines public voting.
    voting = Protocol.load("ai-duel-0.1").voting
    return {
        "min_coverage_percent": round(voting["min_watch_coverage"] * 100),
        "require_audio": bool(voting["require_audio"]),
    }


@require_http_methods(["GET", "POST"])
def start(request: HttpRequest) -> HttpResponse:
    """/vote/: the rules in plain words, then the next pair for this voter."""
    voter = current_voter(request)
    rounds = selectors.voting_rounds()
    context: dict[str, Any] = {
        "voter": voter,
        "rounds": rounds,
        "expertise_choices": EXPERTISE_CHOICES,
        **_rules_context(rounds[0] if rounds else None),
    }
    if request.method == "GET":
        return render(request, "voting/start.html", context)

    net = network_hash(request)
    try:
        limits.hit("assign_network", net)
        if voter is None:
            limits.hit("voter_network", net)
            voter = services.voter_create(
                network_hash=net,
                user_agent=request.META.get("HTTP_USER_AGENT", ""),
                user=getattr(request, "user", None),
            )
        limits.hit("assign_voter", str(voter.public_id))
    except limits.Limited as exc:
        context["message"] = str(exc)
        return render(request, "voting/start.html", context, status=429)
    expertise = request.POST.get("expertise")
    if expertise is not None and expertise != voter.expertise:
        try:
            voter = services.voter_update_cohort(voter=voter, expertise=expertise)
        except services.VotingError as exc:
            context["message"] = exc.detail
            return _remember(render(request, "voting/start.html", context, status=400), voter)
    for round_ in rounds:
        if services.battles_stale(round_):
            services.battle_sync(round_=round_)
    try:
        assignment = services.assignment_next(voter=voter, resume=request.POST.get("skip") != "1")
    except services.NothingToAssign as exc:
        context.update(voter=voter, message=exc.detail)
        return _remember(render(request, "voting/start.html", context), voter)
    return _remember(redirect("voting:assignment", token=assignment.token), voter)


def _owned_assignment(request: HttpRequest, token: str):
    """The assignment, only for the voter it was given to (anyone else gets a plain 404)."""
    assignment = selectors.assignment_for_page(token)
    voter_id = voter_id_from_cookie(request)
    if assignment is None or not voter_id or str(assignment.voter.public_id) != voter_id:
        raise Http404("No such pair of films.")
    return assignment


@require_GET
def assignment_page(request: HttpRequest, token: str) -> HttpResponse:
    """/vote/a/<token>/: Film 1 then Film 2, the playback proof, the vote."""
    assignment = _owned_assignment(request, token)
    if Ballot.objects.filter(assignment=assignment).exists():
        return redirect("voting:thanks", token=token)
    round_ = assignment.round
    rules = selectors.watch_rules(round_)
    sessions = list(PlaybackSession.objects.filter(assignment=assignment).order_by("film"))
    status = services.playback_status(sessions, rules)
    config = {
        "token": token,
        "key": assignment.hmac_key,
        "heartbeat": reverse("voting:heartbeat", kwargs={"token": token}),
        "ballot": reverse("voting:ballot", kwargs={"token": token}),
        "csrf": get_token(request),
        "minVolume": MIN_AUDIBLE_VOLUME,
        "status": status,
        "seq": max((s.last_seq for s in sessions), default=0),
    }
    context = {
        "assignment": assignment,
        "films": [
            {"number": n, "src": reverse("voting:media", kwargs={"token": token, "film": n})}
            for n in (1, 2)
        ],
        "allow_ties": selectors.voting_settings(round_)["allow_ties"],
        "config": config,
        **_rules_context(round_),
    }
    response = render(request, "voting/assignment.html", context)
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response


@csrf_exempt  # checked below, answered as JSON
@require_POST
def heartbeat(request: HttpRequest, token: str) -> JsonResponse:
    """Signed heartbeat from the player: 200 when it counts, 409 with the reason when not."""
    refusal = _csrf_refusal(request)
    if refusal is not None:
        return refusal
    voter_id = voter_id_from_cookie(request)
    try:
        limits.hit("heartbeat_voter", voter_id or "")
        limits.hit("heartbeat_network", network_hash(request))
        result = services.heartbeat_record(
            token=token,
            voter_id=voter_id,
            body=request.body,
            signature=request.headers.get("X-Duel-Signature", ""),
        )
    except limits.Limited as exc:
        return _limited(exc)
    except services.VotingError as exc:
        return _service_error(exc)
    if not result.accepted:
        return _error(409, result.refusal, result.detail, **result.status)
    return JsonResponse({"accepted": True, **result.status})


@csrf_exempt  # checked below, answered as JSON
@require_POST
def ballot(request: HttpRequest, token: str) -> JsonResponse:
    """Signed ballot: 201 once locked and committed to the log."""
    refusal = _csrf_refusal(request)
    if refusal is not None:
        return refusal
    voter_id = voter_id_from_cookie(request)
    net = network_hash(request)
    try:
        limits.hit("ballot_voter", voter_id or "")
        limits.hit("ballot_network", net)
        locked = services.ballot_cast_signed(
            token=token,
            voter_id=voter_id,
            body=request.body,
            signature=request.headers.get("X-Duel-Signature", ""),
            network_hash=net,
        )
    except limits.Limited as exc:
        return _limited(exc)
    except services.VotingError as exc:
        return _service_error(exc)
    return JsonResponse(
        {
            "locked": True,
            "receipt": locked.sha256,
            "log_index": locked.log_index,
            "counted": not locked.exclusion_reason,
            "redirect": reverse("voting:thanks", kwargs={"token": token}),
        },
        status=201,
    )


@require_GET
def thanks(request: HttpRequest, token: str) -> HttpResponse:
    """After the vote: the receipt, and the identities only where the round allows it."""
    assignment = _owned_assignment(request, token)
    locked = Ballot.objects.filter(assignment=assignment).first()
    if locked is None:
        return redirect("voting:assignment", token=token)
    round_ = assignment.round
    identities = None
    # The round setting shows identities after a locked vote, but never before the round's
    # reveal: a voter who learned them could unblind the films for everyone after them
    # (issue 8: identities stay hidden everywhere until the staff unlock).
    if (
        selectors.voting_settings(round_)["show_identities_after_vote"]
        and locked.log_index is not None
        and round_.identities_revealed
    ):
        battle = assignment.battle
        identities = [
            battle.run_for(side).entry.system_version.system.name
            for side in (assignment.first, assignment.second)
        ]
    return render(
        request,
        "voting/thanks.html",
        {"ballot": locked, "identities": identities, "round": round_},
    )


# ---------------------------------------------------------------------------------------------
# Media: per-assignment opaque addresses with HTTP range support

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def _byte_range(header: str, size: int) -> tuple[int, int] | None | bool:
    """(start, end) inclusive for a single ``Range``; ``None`` for none; False if unsatisfiable.

    Multiple ranges are answered with the first one only (players ask for one at a time).
    """
    if not header:
        return None
    match = _RANGE.match(header.split(",")[0].strip())
    if not match:
        return None
    first, last = match.groups()
    if first == "" and last == "":
        return None
    if first == "":
        length = int(last)
        if length == 0:
            return False
        return max(0, size - length), size - 1
    start = int(first)
    end = int(last) if last else size - 1
    if start >= size or end < start:
        return False
    return start, min(end, size - 1)


def _file_chunks(name: str, start: int, length: int) -> Iterator[bytes]:
    with default_storage.open(name, "rb") as handle:
        handle.seek(start)
        remaining = length
        while remaining > 0:
            chunk = handle.read(min(MEDIA_CHUNK, remaining))
            if not chunk:
                break
            remaining -= len(chunk)
            yield chunk


@require_http_methods(["GET", "HEAD"])
def media(request: HttpRequest, token: str, film: int) -> HttpResponseBase:
    """/vote/m/<token>/<1|2>: the proxy of Film 1 or Film 2 of this voter's assignment."""
    if film not in (1, 2):
        raise Http404("No such film.")
    assignment = _owned_assignment(request, token)
    try:
        limits.hit("media_voter", str(assignment.voter.public_id))
    except limits.Limited as exc:
        return _limited(exc)
    proxy = assignment.battle.run_for(assignment.side_of_film(film)).proxy_file
    size = proxy.size_bytes
    wanted = _byte_range(request.headers.get("Range", ""), size)
    if wanted is False:
        response = HttpResponse(status=416)
        response["Content-Range"] = f"bytes */{size}"
        for header, value in MEDIA_HEADERS.items():
            response[header] = value
        return response
    start, end = wanted if wanted else (0, size - 1)
    length = end - start + 1
    body = iter(()) if request.method == "HEAD" else _file_chunks(proxy.storage_name, start, length)
    response = StreamingHttpResponse(
        body, status=206 if wanted else 200, content_type=MEDIA_CONTENT_TYPE
    )
    response["Content-Length"] = str(length)
    if wanted:
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
    for header, value in MEDIA_HEADERS.items():
        response[header] = value
    return response


# ---------------------------------------------------------------------------------------------
# The deidentified ballot export


@require_GET
def ballots_export(request: HttpRequest, slug: str, fmt: str) -> HttpResponse:
    """/api/v1/rounds/<slug>/ballots.json|.csv: the deidentified ballot records."""
    if fmt not in ("json", "csv"):
        raise Http404("Use ballots.json or ballots.csv.")
    round_ = get_object_or_404(Round.objects.select_related("protocol_version"), slug=slug)
    document = selectors.ballot_export(round_)
    if fmt == "json":
        return JsonResponse(document)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(document["columns"])
    for row in document["ballots"]:
        writer.writerow(
            [
                str(row[c]).lower() if isinstance(row[c], bool) else row[c]
                for c in document["columns"]
            ]
        )
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{round_.slug}-ballots.csv"'
    return response
