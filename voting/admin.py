"""Staff views of the voting records: read-only, so staff see votes counted, never edit them.

Ballots, assignments and heartbeats are append-only in the database; the admin offers no add,
change or delete. The ballot list shows the counts per round above the list.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, Q

from voting import selectors
from voting.models import Assignment, Ballot, BallotExclusion, Battle, Voter


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Battle)
class BattleAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "round",
        "prompt",
        "pair",
        "duration_a_s",
        "duration_b_s",
        "assignment_count",
        "ballot_count",
        "valid_count",
    )
    list_filter = ("round",)

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .select_related("round", "package", "run_a__entry", "run_b__entry")
            .annotate(
                assignment_total=Count("assignments", distinct=True),
                ballot_total=Count("ballots", distinct=True),
                valid_total=Count(
                    "ballots",
                    filter=Q(ballots__exclusion_reason="") & Q(ballots__exclusions__isnull=True),
                    distinct=True,
                ),
            )
        )

    @admin.display(description="prompt", ordering="package__prompt_key")
    def prompt(self, obj: Battle) -> str:
        return obj.package.prompt_key

    @admin.display(description="pair (labels)")
    def pair(self, obj: Battle) -> str:
        return f"{obj.run_a.entry.label} vs {obj.run_b.entry.label}"

    @admin.display(description="assignments", ordering="assignment_total")
    def assignment_count(self, obj) -> int:
        return obj.assignment_total

    @admin.display(description="ballots", ordering="ballot_total")
    def ballot_count(self, obj) -> int:
        return obj.ballot_total

    @admin.display(description="in main result", ordering="valid_total")
    def valid_count(self, obj) -> int:
        return obj.valid_total


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = ("token_prefix", "round", "battle", "first", "voter", "created_at", "voted")
    list_filter = ("round", "first")
    list_select_related = ("round", "battle", "voter", "ballot")
    exclude = ("hmac_key",)

    @admin.display(description="token")
    def token_prefix(self, obj: Assignment) -> str:
        return f"{obj.token[:10]}…"

    @admin.display(boolean=True, description="voted")
    def voted(self, obj: Assignment) -> bool:
        return hasattr(obj, "ballot")


class BallotExclusionInline(admin.TabularInline):
    model = BallotExclusion
    extra = 0
    can_delete = False
    readonly_fields = ("reason", "detail", "log_index", "created_at")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Ballot)
class BallotAdmin(ReadOnlyAdmin):
    list_display = (
        "public_id",
        "round",
        "battle",
        "first",
        "choice",
        "outcome",
        "exclusion_reason",
        "audio_on",
        "synthetic",
        "log_index",
        "locked_at",
    )
    list_filter = ("round", "synthetic", "audio_on", "choice")
    list_select_related = ("round", "battle")
    search_fields = ("public_id", "sha256")
    exclude = ("network_hash", "timing_fingerprint")
    inlines = [BallotExclusionInline]
    change_list_template = "admin/voting/ballot/change_list.html"

    def changelist_view(self, request, extra_context=None):
        counts = selectors.ballot_counts_by_round()
        extra_context = {**(extra_context or {}), "round_counts": counts}
        return super().changelist_view(request, extra_context=extra_context)


@admin.register(Voter)
class VoterAdmin(ReadOnlyAdmin):
    list_display = ("public_id", "device", "expertise", "synthetic", "ballots", "created_at")
    list_filter = ("device", "expertise", "synthetic")
    exclude = ("network_hash",)

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(ballot_total=Count("ballots"))

    @admin.display(description="ballots", ordering="ballot_total")
    def ballots(self, obj) -> int:
        return obj.ballot_total
