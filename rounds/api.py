"""/api/v1/ endpoints for protocols, systems, rounds, packages, entries, runs and manifests."""

from __future__ import annotations

from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from rounds import services
from rounds.manifest import blinded
from rounds.models import Entry, InputPackage, ProtocolVersion, Round, Run, System, SystemVersion
from rounds.serializers import (
    EntrySerializer,
    InputPackageSerializer,
    ProtocolVersionSerializer,
    RoundSerializer,
    RunSerializer,
    SystemSerializer,
    SystemVersionSerializer,
)


class ProtocolVersionViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = ProtocolVersion.objects.all()
    serializer_class = ProtocolVersionSerializer
    lookup_field = "key"
    lookup_value_regex = "[^/]+"


class SystemViewSet(viewsets.ModelViewSet):
    """Systems are staff records; the public list does not say which round they entered."""

    queryset = System.objects.all()
    serializer_class = SystemSerializer
    http_method_names = ["get", "post", "patch", "head", "options"]

    def get_queryset(self):
        if self.request.user.is_staff:
            return super().get_queryset()
        return System.objects.none()


class SystemVersionViewSet(SystemViewSet):
    queryset = SystemVersion.objects.select_related("system")
    serializer_class = SystemVersionSerializer


class RoundViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    queryset = Round.objects.select_related("protocol_version", "season")
    serializer_class = RoundSerializer
    lookup_field = "slug"

    def perform_update(self, serializer):
        # A committed round refuses through the service with a clear error (400).
        services.round_update(round_=serializer.instance, changes=dict(serializer.validated_data))

    @action(detail=True, methods=["post"])
    def commit(self, request, slug=None):
        round_ = services.round_commit(round_=self.get_object(), actor=request.user.get_username())
        return Response(RoundSerializer(round_, context={"request": request}).data)

    @action(detail=True, methods=["post"], url_path="open")
    def open_round(self, request, slug=None):
        round_ = services.round_open(round_=self.get_object(), actor=request.user.get_username())
        return Response(RoundSerializer(round_, context={"request": request}).data)

    @action(detail=True, methods=["get", "post"])
    def packages(self, request, slug=None):
        round_ = self.get_object()
        if request.method == "POST":
            package = services.package_add(
                round_=round_,
                prompt_key=request.data.get("prompt_key", ""),
                content=request.data.get("content"),
                checklist=request.data.get("checklist"),
                task_lane=request.data.get("task_lane", ""),
            )
            return Response(
                InputPackageSerializer(package, context={"request": request}).data, status=201
            )
        packages = InputPackage.objects.filter(round=round_).select_related("round")
        return Response(
            InputPackageSerializer(packages, many=True, context={"request": request}).data
        )

    @action(detail=True, methods=["get"])
    def disclosures(self, request, slug=None):
        """The protocol's disclosure schedule, item by item, as visible at this stage."""
        from rounds.disclosure import disclosures

        round_ = self.get_object()
        if not round_.protocol.disclosure_schedule:
            raise Http404(f"{round_.protocol.key} has no disclosure schedule")
        return Response({"round": round_.slug, "state": round_.state, "items": disclosures(round_)})

    @action(detail=True, methods=["get"])
    def entries(self, request, slug=None):
        entries = Entry.objects.filter(round=self.get_object()).select_related(
            "round", "system_version__system"
        )
        return Response(EntrySerializer(entries, many=True).data)


class RunViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = RunSerializer
    lookup_field = "public_id"

    def get_queryset(self):
        queryset = Run.objects.select_related("entry__round", "package").prefetch_related(
            "attempts"
        )
        round_slug = self.request.query_params.get("round")
        if round_slug:
            queryset = queryset.filter(entry__round__slug=round_slug)
        return queryset


def run_manifest(request, public_id):
    """The run manifest as JSON; blinded (identity withheld) until the round's reveal."""
    run = get_object_or_404(Run.objects.select_related("entry__round"), public_id=public_id)
    manifest = run.manifests.filter(superseded_by__isnull=True).order_by("-id").first()
    if manifest is None:
        raise Http404("this run has no manifest yet")
    if run.entry.round.identities_revealed:
        document = manifest.document
    else:
        document = blinded(manifest)
    response = JsonResponse(document, json_dumps_params={"sort_keys": True})
    response["X-Manifest-SHA256"] = manifest.sha256
    return response


def public_proxy(request, storage_name: str):
    """The public review proxy of a run, streamed from storage.

    Before the round's reveal only staff may fetch it by this address: voters and jurors get
    proxies through per-assignment opaque addresses, so this one cannot link a film they saw
    to a run or a manifest.
    """
    run = (
        Run.objects.select_related("entry__round", "proxy_file")
        .filter(proxy_file__storage_name=storage_name)
        .first()
    )
    if run is None:
        raise Http404("no such proxy")
    if not (run.entry.round.identities_revealed or request.user.is_staff):
        raise Http404("no such proxy")
    return stream_media_file(run.proxy_file)


def stream_media_file(media_file):
    """A streaming response for a stored file (never read whole into memory)."""
    from django.core.files.storage import default_storage
    from django.http import FileResponse

    handle = default_storage.open(media_file.storage_name, "rb")
    response = FileResponse(handle, content_type=media_file.content_type)
    response["X-Content-SHA256"] = media_file.sha256
    response["Cache-Control"] = "private, max-age=3600"
    return response
