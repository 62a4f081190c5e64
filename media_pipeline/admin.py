"""Staff admin for media: files, analyses, proxies, segment clips and jobs with progress.

Everything here is read-only: media rows are written only by services (and stored files'
checksums never change). Jobs show their state and progress bar.
"""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html

from media_pipeline.models import MediaAnalysis, MediaFile, MediaJob, Proxy, SegmentClip


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(MediaFile)
class MediaFileAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "short_sha256", "size_bytes", "content_type", "created_at")
    list_filter = ("kind",)
    search_fields = ("sha256", "storage_name")

    @admin.display(description="SHA-256")
    def short_sha256(self, obj: MediaFile) -> str:
        return obj.sha256[:16]


@admin.register(MediaAnalysis)
class MediaAnalysisAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "media_file",
        "protocol_key",
        "duration_class",
        "aspect_ratio",
        "conforming",
        "problem_list",
        "duration_s",
        "effective_duration_s",
        "created_at",
    )
    list_filter = ("protocol_key", "duration_class", "conforming", "analysed")
    list_select_related = ("media_file",)

    @admin.display(description="Problems")
    def problem_list(self, obj: MediaAnalysis) -> str:
        return ", ".join(obj.problems) or "-"


@admin.register(Proxy)
class ProxyAdmin(ReadOnlyAdmin):
    list_display = ("id", "original", "proxy_file", "protocol_key", "verified", "created_at")
    list_select_related = ("original", "proxy_file")

    @admin.display(boolean=True, description="Verified")
    def verified(self, obj: Proxy) -> bool:
        return bool(obj.verification.get("ok"))


@admin.register(SegmentClip)
class SegmentClipAdmin(ReadOnlyAdmin):
    list_display = ("id", "proxy", "start_s", "end_s", "clip_file", "created_at")
    list_select_related = ("proxy", "clip_file")


@admin.register(MediaJob)
class MediaJobAdmin(ReadOnlyAdmin):
    list_display = (
        "task_id",
        "kind",
        "state",
        "progress_bar",
        "attempts",
        "media_file",
        "heartbeat_at",
        "error_summary",
    )
    list_filter = ("kind", "state")
    search_fields = ("task_id",)
    list_select_related = ("media_file",)

    @admin.display(description="Progress")
    def progress_bar(self, obj: MediaJob):
        percent = round(obj.progress * 100)
        return format_html(
            '<progress max="100" value="{}" title="{}%"></progress> {}%', percent, percent, percent
        )

    @admin.display(description="Error")
    def error_summary(self, obj: MediaJob) -> str:
        return obj.error[:120]
