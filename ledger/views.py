"""Public, read-only endpoints of the transparency log under ``/api/v1/log/``.

Anyone can read the checkpoint, the entries with their exact bytes and signatures, inclusion
and consistency proofs, the public key, and the published records, and verify all of it
without trusting the operator (``ledger/verifier.py`` does exactly that over HTTP).
Hashes are lowercase hex in JSON; entry bytes and signatures are standard base64.
"""

from __future__ import annotations

import base64
import json

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ledger import keys, merkle, selectors, services
from ledger.models import EntryKind, LogEntry

MAX_PAGE = 1000
DEFAULT_PAGE = 100


class BadParameter(ValueError):
    """A query parameter that is missing, not an integer, or out of range."""


def _int_param(request: Request, name: str, default: int | None = None) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        if default is None:
            raise BadParameter(f"'{name}' is required")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadParameter(f"'{name}' must be an integer, not {raw!r}") from None
    if value < 0:
        raise BadParameter(f"'{name}' must be non-negative")
    return value


def _bad_request(message: str) -> Response:
    return Response({"error": message}, status=400)


def entry_json(entry: LogEntry) -> dict:
    """An entry as published: its fields plus the exact signed bytes, leaf hash and signature."""
    data = bytes(entry.entry_bytes)
    fields = json.loads(data)
    return {
        "index": entry.index,
        "kind": fields["kind"],
        "subject": fields["subject"],
        "timestamp": fields["timestamp"],
        "supersedes": fields["supersedes"],
        "payload": fields["payload"],
        "entry": base64.b64encode(data).decode("ascii"),
        "leaf_hash": bytes(entry.leaf_hash).hex(),
        "key_id": bytes(entry.key_id).hex(),
        "signature": base64.b64encode(bytes(entry.signature)).decode("ascii"),
    }


class PublicLogView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]


class CheckpointView(PublicLogView):
    """The signed tree head as a C2SP tlog-checkpoint signed note (``text/plain``).

    Without ``tree_size`` the current tree is signed (once per size, then stored) and
    returned; with ``tree_size`` a checkpoint published earlier for that size is returned.
    """

    @extend_schema(
        parameters=[OpenApiParameter("tree_size", int, required=False)],
        responses={(200, "text/plain"): OpenApiTypes.STR},
    )
    def get(self, request: Request) -> HttpResponse | Response:
        try:
            if "tree_size" in request.query_params:
                size = _int_param(request, "tree_size")
                checkpoint = selectors.checkpoint_at(size)
                if checkpoint is None:
                    return Response({"error": f"no checkpoint published at {size}"}, status=404)
            else:
                checkpoint = services.checkpoint_publish()
        except BadParameter as exc:
            return _bad_request(str(exc))
        return HttpResponse(checkpoint.note, content_type="text/plain; charset=utf-8")


class EntriesView(PublicLogView):
    """Entries ``start <= index < end`` (at most 1000 per page; ``end`` is clamped)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("start", int, required=False),
            OpenApiParameter("end", int, required=False),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        size = selectors.tree_size()
        try:
            start = _int_param(request, "start", 0)
            end = _int_param(request, "end", start + DEFAULT_PAGE)
            if end < start:
                raise BadParameter("'end' must not be smaller than 'start'")
            if start > size:
                raise BadParameter(f"'start' {start} is beyond the log (size {size})")
        except BadParameter as exc:
            return _bad_request(str(exc))
        end = min(end, size, start + MAX_PAGE)
        entries = [entry_json(e) for e in selectors.entries_between(start, end)]
        return Response({"tree_size": size, "start": start, "end": end, "entries": entries})


class InclusionProofView(PublicLogView):
    """RFC 9162 inclusion proof of entry ``index`` in the tree of size ``tree_size``."""

    @extend_schema(
        parameters=[
            OpenApiParameter("index", int, required=True),
            OpenApiParameter("tree_size", int, required=False),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        try:
            index = _int_param(request, "index")
            size = _int_param(request, "tree_size", selectors.tree_size())
            proof, root = selectors.inclusion_proof_and_root(index, size)
        except (BadParameter, merkle.ProofError) as exc:
            return _bad_request(str(exc))
        entry = selectors.entry_at(index)
        return Response(
            {
                "index": index,
                "tree_size": size,
                "leaf_hash": bytes(entry.leaf_hash).hex(),
                "root_hash": root.hex(),
                "inclusion_path": [h.hex() for h in proof],
            }
        )


class ConsistencyProofView(PublicLogView):
    """RFC 9162 consistency proof from the tree of size ``first`` to that of ``second``."""

    @extend_schema(
        parameters=[
            OpenApiParameter("first", int, required=True),
            OpenApiParameter("second", int, required=False),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        try:
            first = _int_param(request, "first")
            second = _int_param(request, "second", selectors.tree_size())
            if first > second:
                raise BadParameter("'first' must not be larger than 'second'")
            proof, first_root, second_root = selectors.consistency_proof_and_roots(first, second)
        except (BadParameter, merkle.ProofError) as exc:
            return _bad_request(str(exc))
        return Response(
            {
                "first": first,
                "second": second,
                "first_root": first_root.hex(),
                "second_root": second_root.hex(),
                "consistency_path": [h.hex() for h in proof],
            }
        )


class KeyView(PublicLogView):
    """The log's public Ed25519 key, with its C2SP note verifier key string."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        verifier = keys.verifier_key()
        return Response(
            {
                "origin": keys.origin(),
                "key_name": verifier.name,
                "algorithm": "Ed25519",
                "key_id": verifier.key_id.hex(),
                "public_key": base64.b64encode(verifier.public_key).decode("ascii"),
                "verifier_key": str(verifier),
            }
        )


class RecordsView(PublicLogView):
    """Published records of one kind (deidentified ballots, segment windows, jury
    assignments, order schedules, calculation inputs...), each one a log entry."""

    @extend_schema(
        parameters=[
            OpenApiParameter("after", int, required=False),
            OpenApiParameter("limit", int, required=False),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request, kind: str) -> Response:
        if kind not in EntryKind.values:
            return Response({"error": f"unknown record kind {kind!r}"}, status=404)
        try:
            after = request.query_params.get("after")
            after_index = -1 if after in (None, "") else _int_param(request, "after")
            limit = min(_int_param(request, "limit", DEFAULT_PAGE), MAX_PAGE)
        except BadParameter as exc:
            return _bad_request(str(exc))
        records = selectors.records_of_kind(kind, after=after_index, limit=limit)
        return Response(
            {
                "kind": kind,
                "records": [entry_json(e) for e in records],
                "next_after": records[-1].index if len(records) == limit and records else None,
            }
        )
