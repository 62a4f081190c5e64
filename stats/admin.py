"""Staff admin for result snapshots: read-only records with a recompute check."""

from __future__ import annotations

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html

from stats import selectors
from stats.models import ResultSnapshot


@admin.register(ResultSnapshot)
class ResultSnapshotAdmin(admin.ModelAdmin):
    """Snapshots are append-only: staff read and check them, never change or delete them."""

    list_display = (
        "id",
        "round",
        "result_kind",
        "status",
        "round_state",
        "protocol_key",
        "inputs_sha256",
        "log_index",
        "computed_at",
        "inputs_link",
    )
    list_filter = ("result_kind", "status", "protocol_key")
    list_select_related = ("round",)
    search_fields = ("round__slug", "inputs_sha256", "result_sha256")
    exclude = ("inputs",)
    actions = ["recheck"]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in ResultSnapshot._meta.fields if f.name != "inputs"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("inputs")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="inputs")
    def inputs_link(self, obj):
        url = reverse("stats:inputs-json", kwargs={"slug": obj.round.slug, "snapshot_id": obj.pk})
        return format_html('<a href="{}">inputs.json</a>', url)

    @admin.action(description="Check: recompute from the exported inputs and compare")
    def recheck(self, request, queryset):
        for snapshot in queryset:
            check = selectors.snapshot_recheck(snapshot)
            if check.ok:
                self.message_user(
                    request,
                    f"snapshot {snapshot.pk}: inputs hash and log entry match; the recomputed "
                    "result equals the published one",
                    level=messages.SUCCESS,
                )
            else:
                problems = check.differences[:5]
                if not check.inputs_match:
                    problems.insert(0, "the inputs hash differs")
                if not check.logged:
                    problems.insert(0, "the calculation_inputs log entry does not match")
                self.message_user(
                    request,
                    f"snapshot {snapshot.pk}: {'; '.join(problems)}",
                    level=messages.ERROR,
                )
