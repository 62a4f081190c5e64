"""Juror page for within-segment quality (protocol: Public segment result).

``/jury/segments/<round slug>/`` shows the juror's next unjudged pair: the same published
window of two films of one prompt, played one after the other through opaque per-assignment
addresses, each with the playback proof of full films measured against the clip's own probed
duration, then a forced choice. No system, entry or film label appears on the page.

An assignment (its random token, the two windows, the clips, the proof state of each clip)
lives in the juror's server-side Django session: it is a working state, not a record; what is
recorded is the vote, through ``segment_vote_record``, with what the proof of each clip came
to (heartbeats, seconds credited, coverage, ending, refused heartbeats).
"""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET, require_POST

from juries import playback, segment_judging, services
from juries.models import SegmentWindow
from juries.views import (
    LOGIN_URL,
    _juror,
    heartbeat_response,
    media_response,
    parse_heartbeat,
)
from media_pipeline.models import MediaFile
from rounds.models import Round

SESSION_KEY = "juries.segment_assignments"
SLOTS = (0, 1)


def _assignments(request: HttpRequest) -> dict[str, Any]:
    return request.session.setdefault(SESSION_KEY, {})


def _assignment(request: HttpRequest, token: str) -> dict[str, Any]:
    found = _assignments(request).get(token)
    if found is None:
        raise Http404("no such assignment")
    return found


def _proof(
    assignment: dict[str, Any], slot: int, rules: playback.ProofRules
) -> tuple[playback.ProofState, playback.Verdict]:
    """A clip's proof state and where it stands against the clip's probed duration."""
    state = playback.ProofState.from_json(assignment["proofs"][slot])
    duration = assignment["durations"][slot]
    return state, playback.proof_verdict(state, duration_s=duration, rules=rules)


def _complete(assignment: dict[str, Any], slot: int, rules: playback.ProofRules) -> bool:
    return _proof(assignment, slot, rules)[1].complete


def _evidence(assignment: dict[str, Any], slot: int, rules: playback.ProofRules) -> dict:
    """What the vote record keeps of a clip's playback proof."""
    state, verdict = _proof(assignment, slot, rules)
    return {
        "duration_s": assignment["durations"][slot],
        "heartbeats": state.last_seq + 1,
        "watched_s": verdict.watched_s,
        "coverage": verdict.coverage,
        "reached_ending": verdict.reached_ending,
        "refused": dict(state.violations),
    }


def _new_assignment(round_: Round, first: SegmentWindow, second: SegmentWindow) -> dict:
    clips = [segment_judging.segment_clip(w) for w in (first, second)]  # outside transactions
    return {
        "round": round_.pk,
        "windows": [first.pk, second.pk],
        "media": [str(clip.clip_file_id) for clip in clips],
        "durations": [segment_judging.clip_duration_s(clip) for clip in clips],
        "proofs": [None, None],
    }


@login_required(login_url=LOGIN_URL)
@require_GET
@ensure_csrf_cookie
def segments_page(request: HttpRequest, slug: str) -> HttpResponse:
    juror = _juror(request)
    round_ = get_object_or_404(Round, slug=slug)
    if not segment_judging.segment_juror_active(juror, round_):
        raise Http404("not a juror of this round")
    context: dict[str, Any] = {"round": round_, "pair": None, "judging": True}
    if round_.state != Round.State.JUDGING:
        context["judging"] = False
        return render(request, "juries/segments.html", context)
    pending = segment_judging.segment_pairs_pending(juror, round_)
    context["remaining"] = len(pending)
    if not pending:
        return render(request, "juries/segments.html", context)
    first, second = pending[0]
    assignments = _assignments(request)
    token = next(
        (
            t
            for t, a in assignments.items()
            if a["round"] == round_.pk and a["windows"] == [first.pk, second.pk]
        ),
        None,
    )
    if token is None:
        # Drop this round's stale assignments (a pair voted elsewhere), then cut and probe.
        for stale in [t for t, a in assignments.items() if a["round"] == round_.pk]:
            del assignments[stale]
        token = secrets.token_urlsafe(18)
        assignments[token] = _new_assignment(round_, first, second)
        request.session.modified = True
    rules = services.proof_rules(round_)
    assignment = assignments[token]
    context.update(
        {
            "pair": token,
            "index": first.index + 1,
            "slots": [
                {
                    "slot": slot,
                    "media_url": reverse("juries:segment-media", args=[token, slot]),
                    "beat_url": reverse("juries:segment-beat", args=[token, slot]),
                    "complete": _complete(assignment, slot, rules),
                    "next_seq": int((assignment["proofs"][slot] or {}).get("last_seq", -1)) + 1,
                }
                for slot in SLOTS
            ],
            "vote_url": reverse("juries:segment-vote", args=[token]),
            "min_playback_pct": f"{rules.min_playback * 100:g}",
            "require_ending": rules.require_ending,
        }
    )
    return render(request, "juries/segments.html", context)


def _slot(slot: int) -> int:
    if slot not in SLOTS:
        raise Http404("no such clip")
    return slot


@login_required(login_url=LOGIN_URL)
@require_GET
def segment_media(request: HttpRequest, token: str, slot: int) -> HttpResponse:
    """A clip of the assignment; the second only once the first has played through."""
    _juror(request)
    assignment = _assignment(request, token)
    slot = _slot(slot)
    round_ = Round.objects.get(pk=assignment["round"])
    if slot == 1 and not _complete(assignment, 0, services.proof_rules(round_)):
        raise Http404("play the first clip first")
    return media_response(request, MediaFile.objects.get(pk=assignment["media"][slot]))


@login_required(login_url=LOGIN_URL)
@require_POST
def segment_beat(request: HttpRequest, token: str, slot: int) -> JsonResponse:
    """One playback heartbeat for a clip, applied against the server clock."""
    _juror(request)
    assignment = _assignment(request, token)
    slot = _slot(slot)
    try:
        _, beat = parse_heartbeat(request)
    except (KeyError, TypeError, ValueError):
        return JsonResponse({"ok": False, "errors": ["malformed heartbeat"]}, status=400)
    round_ = Round.objects.get(pk=assignment["round"])
    if round_.state != Round.State.JUDGING:
        return JsonResponse({"ok": False, "errors": ["the round is not in judging"]}, status=409)
    rules = services.proof_rules(round_)
    if slot == 1 and not _complete(assignment, 0, rules):
        return JsonResponse({"ok": False, "errors": ["play the first clip first"]}, status=409)
    duration = assignment["durations"][slot]
    state = playback.ProofState.from_json(assignment["proofs"][slot])
    outcome = playback.proof_apply(
        state, beat, server_s=timezone.now().timestamp(), duration_s=duration, rules=rules
    )
    assignment["proofs"][slot] = state.to_json()
    request.session.modified = True
    verdict = playback.proof_verdict(state, duration_s=duration, rules=rules)
    return heartbeat_response(outcome, verdict)


@login_required(login_url=LOGIN_URL)
@require_POST
def segment_vote(request: HttpRequest, token: str) -> HttpResponse:
    """The forced choice; refused until both clips' playback is proven."""
    juror = _juror(request)
    assignment = _assignment(request, token)
    round_ = Round.objects.get(pk=assignment["round"])
    rules = services.proof_rules(round_)
    back = reverse("juries:segments", args=[round_.slug])
    if not all(_complete(assignment, slot, rules) for slot in SLOTS):
        return JsonResponse(
            {"ok": False, "errors": ["play both clips through before choosing"]}, status=409
        )
    first, second = (SegmentWindow.objects.get(pk=pk) for pk in assignment["windows"])
    try:
        segment_judging.segment_vote_submit(
            juror=juror,
            first=first,
            second=second,
            choice=request.POST.get("choice", ""),
            playback=[_evidence(assignment, slot, rules) for slot in SLOTS],
        )
    except ValidationError as exc:
        return JsonResponse({"ok": False, "errors": list(exc.messages)}, status=409)
    del _assignments(request)[token]
    request.session.modified = True
    return HttpResponseRedirect(back)
