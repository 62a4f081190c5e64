"""HTTP API of the common-engine gateway, for entrants' orchestration systems.

Authenticated with ``Authorization: Bearer <entry token>``. JSON in, JSON out; every refusal
is a 4xx with a stable ``code`` and a plain ``error`` message.
"""

from __future__ import annotations

import json

from django.db import transaction
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from rounds.api import stream_media_file
from rounds.engine_gateway import GatewayRefusal, authenticate, engine_request_create
from rounds.engine_queue import queue_for
from rounds.models import EngineRequest


def _token(request: HttpRequest) -> str:
    header = request.headers.get("Authorization", "")
    return header[7:].strip() if header.startswith("Bearer ") else ""


def _refusal(refusal: GatewayRefusal) -> JsonResponse:
    return JsonResponse({"code": refusal.code, "error": refusal.message}, status=refusal.status)


def _public(request: EngineRequest) -> dict:
    return {
        "id": str(request.public_id),
        "run": str(request.run.public_id) if request.run_id else None,
        "state": request.state,
        "params": request.params,
        "reserved_credits": str(request.reserved_credits),
        "charged_credits": str(request.charged_credits),
        "generated_seconds": request.generated_seconds,
        "output_sha256": request.output_sha256 or None,
        "output_url": (
            f"/api/v1/engine/requests/{request.public_id}/output" if request.output_id else None
        ),
        "error": request.error or None,
    }


@csrf_exempt
@require_POST
def create_request(request: HttpRequest) -> JsonResponse:
    """Admit a request (credit reserved) and queue it for the engine: 202 Accepted."""
    try:
        entry = authenticate(_token(request))
        try:
            body = json.loads(request.body or b"{}")
        except (ValueError, UnicodeDecodeError):
            raise GatewayRefusal("bad_json", "the body must be a JSON object") from None
        if not isinstance(body, dict):
            raise GatewayRefusal("bad_json", "the body must be a JSON object")
        with transaction.atomic():
            engine_request = engine_request_create(entry=entry, body=body)
            round_id = entry.round_id

            def enqueue() -> None:
                from rounds.tasks import engine_dispatch

                queue_for(round_id).push(entry.pk, engine_request.pk)
                engine_dispatch.delay(round_id)

            transaction.on_commit(enqueue)
    except GatewayRefusal as refusal:
        return _refusal(refusal)
    engine_request.refresh_from_db()
    return JsonResponse(_public(engine_request), status=202)


def _own_request(request: HttpRequest, public_id) -> EngineRequest:
    entry = authenticate(_token(request))
    found = EngineRequest.objects.select_related("run").filter(public_id=public_id, entry=entry)
    engine_request = found.first()
    if engine_request is None:
        raise Http404("no such request for this entry")
    return engine_request


@require_GET
def request_status(request: HttpRequest, public_id) -> JsonResponse:
    try:
        return JsonResponse(_public(_own_request(request, public_id)))
    except GatewayRefusal as refusal:
        return _refusal(refusal)


@require_GET
def request_output(request: HttpRequest, public_id):
    try:
        engine_request = _own_request(request, public_id)
    except GatewayRefusal as refusal:
        return _refusal(refusal)
    if engine_request.output_id is None:
        raise Http404("this request has no output")
    return stream_media_file(engine_request.output)


@require_GET
def usage(request: HttpRequest) -> JsonResponse:
    """The entry's credit position: limit, held (reserved in flight plus charged)."""
    from rounds.engine_gateway import credit_committed

    try:
        entry = authenticate(_token(request))
    except GatewayRefusal as refusal:
        return _refusal(refusal)
    limit = entry.round.credit_limit_per_system
    held = credit_committed(entry)
    return JsonResponse(
        {
            "credit_limit": str(limit) if limit is not None else None,
            "credits_held": str(held),
            "credits_available": str(limit - held) if limit is not None else None,
        }
    )
