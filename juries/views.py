"""Juror pages: the schedule, the screening session (player with playback proof, story
questions, scorecard), and the proxy stream. Thin: parse, call one service, render.

Jurors see films only by anonymous label ("Film S-3FA2C1", or "Film B" in a Tovaki task) and
the proxy through an opaque per-viewing address; nothing on these pages names a system.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.storage import FileSystemStorage, default_storage
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET, require_POST

from juries import selectors, services
from juries.forms import AttentionForm, ScorecardForm
from juries.models import Juror, JuryPlan, ScreeningSession, SegmentWindow, Viewing
from juries.playback import Heartbeat, Verdict

LOGIN_URL = "/jury/login/"


class JurorLoginView(LoginView):
    template_name = "juries/login.html"
    redirect_authenticated_user = True

    def get_default_redirect_url(self) -> str:
        return reverse("juries:home")


def _juror(request: HttpRequest) -> Juror:
    juror = selectors.juror_for_user(request.user)
    if juror is None:
        raise PermissionDenied("this account is not a juror's")
    return juror


def _viewing(request: HttpRequest, viewing_id) -> tuple[Juror, Viewing]:
    juror = _juror(request)
    viewing = get_object_or_404(
        Viewing.objects.select_related(
            "film__package", "film__entry", "film__run__proxy_file", "session", "round", "juror"
        ),
        public_id=viewing_id,
    )
    if viewing.juror_id != juror.pk:
        raise Http404("no such viewing")
    return juror, viewing


def _messages(exc: ValidationError) -> list[str]:
    return list(exc.messages)


@login_required(login_url=LOGIN_URL)
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    juror = _juror(request)
    sessions = selectors.juror_sessions(juror)
    rounds = {s.round_id: s.round for s in sessions}
    plans = {p.round_id: p for p in JuryPlan.objects.filter(round_id__in=rounds)}
    rows = []
    for session in sessions:
        viewings = list(session.viewings.all())
        rows.append(
            {
                "session": session,
                "films": len(viewings),
                "done": sum(1 for v in viewings if v.completed_at is not None),
                "statement": plans[session.round_id].attention_statement
                if session.round_id in plans
                else "",
            }
        )
    segment_rounds = [
        r
        for r in sorted(rounds.values(), key=lambda r: r.pk)
        if SegmentWindow.objects.filter(round=r, kind=SegmentWindow.Kind.WITHIN_SEGMENT).exists()
    ]
    return render(
        request,
        "juries/home.html",
        {"juror": juror, "rows": rows, "segment_rounds": segment_rounds},
    )


def _step(viewing: Viewing, has_questions: bool) -> str:
    card = getattr(viewing, "scorecard", None)
    if card is not None and card.is_locked:
        return "done"
    if viewing.started_at is None:
        return "start"
    if viewing.completed_at is None:
        return "watch"
    if has_questions and not viewing.answers.all():
        return "questions"
    return "scorecard"


def _scorecard_form(viewing: Viewing, data=None) -> ScorecardForm:
    round_ = viewing.round
    plan = JuryPlan.objects.get(round=round_)
    partners = services.holistic_partners(viewing)
    card = getattr(viewing, "scorecard", None)
    initial: dict[str, Any] = {}
    if card is not None:
        initial.update({f"score_{k}": v for k, v in card.scores.items()})
    labels = {d["key"]: d["label"] for d in round_.protocol.definition["quality_dimensions"]}
    return ScorecardForm(
        data,
        initial=initial,
        dimensions=[(k, labels[k]) for k in round_.protocol.quality_dimensions],
        scale=services.scale_of(plan),
        anchors=plan.anchors,
        partners=partners,
        partner_labels={str(p.public_id): p.film.display_label for p in partners},
        this_label=viewing.film.display_label,
    )


@login_required(login_url=LOGIN_URL)
@require_GET
@ensure_csrf_cookie
def session_page(request: HttpRequest, session_id) -> HttpResponse:
    juror = _juror(request)
    session = get_object_or_404(
        ScreeningSession.objects.select_related("round", "panel"), public_id=session_id
    )
    if session.juror_id != juror.pk:
        raise Http404("no such session")
    return _render_session(request, session)


def _render_session(
    request: HttpRequest,
    session: ScreeningSession,
    *,
    form: Any = None,
    errors: list[str] | None = None,
) -> HttpResponse:
    viewings = selectors.session_viewings(session)
    with_questions = {
        v.pk: any(q.frozen_at for q in v.film.package.attention_questions.all()) for v in viewings
    }
    steps = [(v, _step(v, with_questions[v.pk])) for v in viewings]
    current = next(((v, s) for v, s in steps if s != "done"), None)
    context: dict[str, Any] = {
        "session": session,
        "steps": steps,
        "current": current[0] if current else None,
        "step": current[1] if current else "finished",
        "errors": errors or [],
        "plan": JuryPlan.objects.get(round=session.round),
        "min_playback_pct": f"{services.jury_rules(session.round)['min_playback'] * 100:g}",
        "require_ending": services.jury_rules(session.round)["require_ending"],
    }
    if current is not None:
        viewing, step = current
        context["blockers"] = []
        context["available_at"] = ""
        if step == "start":
            now = timezone.now()
            blockers = services.viewing_start_blockers(viewing, now=now)
            available = services.viewing_available_at(viewing)
            # Only a wait (the session start, the fixed break) gets a countdown.
            waiting = (
                bool(blockers)
                and available is not None
                and available > now
                and not services.viewing_start_blockers(viewing, now=available)
            )
            context["blockers"] = blockers
            context["available_at"] = available.isoformat() if waiting else ""
        state = viewing.proof or {}
        context["next_seq"] = int(state.get("last_seq", -1)) + 1
        if step == "questions":
            context["form"] = form or AttentionForm(
                questions=services.attention_questions_for(viewing)
            )
        elif step == "scorecard":
            context["form"] = form or _scorecard_form(viewing)
    return render(request, "juries/session.html", context)


@login_required(login_url=LOGIN_URL)
@require_POST
def viewing_start(request: HttpRequest, viewing_id) -> JsonResponse:
    juror, viewing = _viewing(request, viewing_id)
    try:
        viewing = services.viewing_start(viewing=viewing, juror=juror)
    except ValidationError as exc:
        return JsonResponse({"ok": False, "errors": _messages(exc)}, status=409)
    return JsonResponse(
        {
            "ok": True,
            "media": reverse("juries:viewing-media", args=[viewing.public_id]),
            "duration_s": viewing.film.duration_s,
        }
    )


def _finite(value: Any, default: float | None = None) -> float:
    if value is None and default is not None:
        return default
    number = float(value)
    if not math.isfinite(number):
        raise ValueError("not finite")
    return number


def parse_heartbeat(request: HttpRequest) -> tuple[dict[str, Any], Heartbeat]:
    """The JSON body of a heartbeat POST and its :class:`Heartbeat`; raises ``KeyError``,
    ``TypeError`` or ``ValueError`` when malformed."""
    body = json.loads(request.body or b"{}")
    if not isinstance(body, dict):
        raise TypeError("not an object")
    beat = Heartbeat(
        seq=int(body["seq"]),
        position_s=_finite(body["position"]),
        rate=_finite(body.get("rate"), 1.0),
        paused=bool(body.get("paused", False)),
        muted=bool(body.get("muted", False)),
    )
    if beat.seq < 0:
        raise ValueError("negative sequence")
    return body, beat


@login_required(login_url=LOGIN_URL)
@require_POST
def viewing_beat(request: HttpRequest, viewing_id) -> JsonResponse:
    juror, viewing = _viewing(request, viewing_id)
    try:
        body, beat = parse_heartbeat(request)
    except (KeyError, TypeError, ValueError):
        return JsonResponse({"ok": False, "errors": ["malformed heartbeat"]}, status=400)
    try:
        outcome, verdict = services.viewing_heartbeat(
            viewing=viewing, juror=juror, beat=beat, client_played=body.get("played")
        )
    except ValidationError as exc:
        return JsonResponse({"ok": False, "errors": _messages(exc)}, status=409)
    return heartbeat_response(outcome, verdict)


def heartbeat_response(outcome: str, verdict: Verdict) -> JsonResponse:
    """The answer to an accepted heartbeat: what it did and where the proof stands."""
    return JsonResponse(
        {
            "ok": True,
            "outcome": outcome,
            "coverage": verdict.coverage,
            "reached_ending": verdict.reached_ending,
            "complete": verdict.complete,
        }
    )


_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def _byte_range(header: str, size: int) -> tuple[int, int] | None:
    """The single byte range of a ``Range`` header, inclusive, or ``None`` to send it all."""
    match = _RANGE.match(header.strip())
    if not match or size == 0:
        return None
    first, last = match.groups()
    if first == "" and last == "":
        return None
    if first == "":
        start, end = max(0, size - int(last)), size - 1
    else:
        start, end = int(first), min(int(last) if last else size - 1, size - 1)
    if start > end or start >= size:
        return None
    return start, end


def _chunks(handle, remaining: int, chunk: int = 256 * 1024):
    try:
        while remaining > 0:
            data = handle.read(min(chunk, remaining))
            if not data:
                break
            remaining -= len(data)
            yield data
    finally:
        handle.close()


@login_required(login_url=LOGIN_URL)
@require_GET
def viewing_media(request: HttpRequest, viewing_id) -> HttpResponse:
    """The proxy of an assigned, started viewing. Filesystem storage streams it with byte
    ranges (browsers seek and probe with them); other storages redirect to the storage's
    signed address (an opaque name that says nothing about the system)."""
    _, viewing = _viewing(request, viewing_id)
    if viewing.started_at is None:
        raise Http404("start the film first")
    return media_response(request, viewing.film.run.proxy_file)


def media_response(request: HttpRequest, media) -> HttpResponse:
    """Serve one stored ``MediaFile`` to a juror with the same headers whatever it is (a full
    proxy, a segment clip), so the response says nothing about the system behind it."""
    if not isinstance(default_storage, FileSystemStorage):
        return HttpResponseRedirect(default_storage.url(media.storage_name))
    size = media.size_bytes
    wanted = _byte_range(request.headers.get("Range", ""), size)
    handle = default_storage.open(media.storage_name, "rb")
    if wanted is None:
        response: HttpResponse = FileResponse(handle, content_type=media.content_type)
        response["Content-Length"] = str(size)
    else:
        start, end = wanted
        handle.seek(start)
        response = StreamingHttpResponse(
            _chunks(handle, end - start + 1), status=206, content_type=media.content_type
        )
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
        response["Content-Length"] = str(end - start + 1)
    response["Accept-Ranges"] = "bytes"
    response["Cache-Control"] = "private, no-store"
    return response


def _back(viewing: Viewing) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("juries:session", args=[viewing.session.public_id]))


@login_required(login_url=LOGIN_URL)
@require_POST
def viewing_answers(request: HttpRequest, viewing_id) -> HttpResponse:
    juror, viewing = _viewing(request, viewing_id)
    form = AttentionForm(request.POST, questions=services.attention_questions_for(viewing))
    if not form.is_valid():
        return _render_session(request, viewing.session, form=form)
    try:
        services.attention_answers_submit(viewing=viewing, juror=juror, answers=form.answers())
    except ValidationError as exc:
        return _render_session(request, viewing.session, errors=_messages(exc))
    return _back(viewing)


@login_required(login_url=LOGIN_URL)
@require_POST
def viewing_scorecard(request: HttpRequest, viewing_id) -> HttpResponse:
    juror, viewing = _viewing(request, viewing_id)
    form = _scorecard_form(viewing, request.POST)
    if not form.is_valid():
        return _render_session(request, viewing.session, form=form)
    try:
        services.scorecard_save(
            viewing=viewing,
            juror=juror,
            scores=form.scores(),
            choices=form.choices(),
            lock=request.POST.get("action") == "lock",
            actor=juror.public_id,
        )
    except ValidationError as exc:
        return _render_session(request, viewing.session, form=form, errors=_messages(exc))
    return _back(viewing)
