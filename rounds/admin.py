"""Staff admin for rounds and runs: thin, every action calls one service.

Committed rounds, packages and started runs are read-only here (and in the database); actions
move them through their named transitions, and errors are shown as clear messages.
"""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html

from duel.admin_actions import report_action
from rounds import governance, services
from rounds.models import (
    Attempt,
    AuditorAttestation,
    BudgetApproval,
    ChecklistTick,
    CriticReport,
    Disclosure,
    EngineRequest,
    Entry,
    GatewayLogRecord,
    HumanAction,
    InputPackage,
    ProtocolVersion,
    Round,
    Run,
    RunManifest,
    Season,
    System,
    SystemVersion,
    WatermarkPermission,
)
from stats.admin_actions import lock_judgments, recompute_results, reveal_identities


class ImmutableAdminMixin:
    """Append-only records: staff can add and read, never change or delete."""

    def has_change_permission(self, request, obj=None):
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ProtocolVersion)
class ProtocolVersionAdmin(admin.ModelAdmin):
    list_display = ("key", "version", "sha256", "frozen_at", "predecessor")
    readonly_fields = ("key", "name", "version", "definition", "sha256", "frozen_at", "created_at")

    def has_delete_permission(self, request, obj=None):
        return False


class SystemVersionInline(admin.TabularInline):
    model = SystemVersion
    extra = 0


@admin.register(System)
class SystemAdmin(admin.ModelAdmin):
    list_display = ("name", "vendor", "operator_relationship")
    search_fields = ("name", "vendor")
    inlines = [SystemVersionInline]


@admin.register(SystemVersion)
class SystemVersionAdmin(admin.ModelAdmin):
    list_display = ("system", "version", "customer_tier", "public_configuration")
    list_select_related = ("system",)


@admin.register(Disclosure)
class DisclosureAdmin(ImmutableAdminMixin, admin.ModelAdmin):
    list_display = ("kind", "party", "system", "round", "amount", "currency", "log_index")
    list_select_related = ("system", "round")

    def save_model(self, request, obj, form, change):
        created = services.disclosure_add(
            kind=obj.kind,
            party=obj.party,
            text=obj.text,
            system=obj.system,
            round_=obj.round,
            amount=obj.amount,
            currency=obj.currency,
        )
        obj.pk = created.pk


@admin.register(Season)
class SeasonAdmin(admin.ModelAdmin):
    list_display = ("name", "engine_provider", "engine_model_id", "engine_api_version", "state")
    readonly_fields = ("state", "closed_at", "close_reason")
    actions = ["close_season"]

    @admin.action(description="Close: the engine version is unavailable (no new runs)")
    def close_season(self, request, queryset):
        report_action(
            self,
            request,
            lambda s: governance.season_close(
                season=s,
                reason="the required engine version became unavailable",
                actor=request.user.get_username(),
            ),
            queryset,
            "season(s) closed",
        )


@admin.register(WatermarkPermission)
class WatermarkPermissionAdmin(ImmutableAdminMixin, admin.ModelAdmin):
    list_display = ("entry", "kind", "recorded_by", "recorded_at", "log_index")
    fields = ("entry", "kind", "document")

    def save_model(self, request, obj, form, change):
        created = governance.watermark_permission_record(
            entry=obj.entry, kind=obj.kind, document=obj.document, actor=request.user.get_username()
        )
        obj.pk = created.pk


@admin.register(AuditorAttestation)
class AuditorAttestationAdmin(ImmutableAdminMixin, admin.ModelAdmin):
    list_display = ("entry", "auditor_name", "recorded_by", "recorded_at", "log_index")
    fields = ("entry", "auditor_name", "statement")

    def save_model(self, request, obj, form, change):
        created = governance.entry_attest(
            entry=obj.entry,
            auditor_name=obj.auditor_name,
            statement=obj.statement,
            actor=request.user.get_username(),
        )
        obj.pk = created.pk


@admin.register(ChecklistTick)
class ChecklistTickAdmin(ImmutableAdminMixin, admin.ModelAdmin):
    list_display = ("run", "item_id", "met", "reviewer", "created_at")
    fields = ("run", "item_id", "met")

    def save_model(self, request, obj, form, change):
        created = governance.checklist_tick_record(
            run=obj.run, item_id=obj.item_id, met=obj.met, reviewer=f"staff:{request.user.pk}"
        )
        obj.pk = created.pk


@admin.register(CriticReport)
class CriticReportAdmin(ImmutableAdminMixin, admin.ModelAdmin):
    list_display = ("run", "critic", "critic_version", "created_at")
    readonly_fields = ("run", "critic", "critic_version", "report", "created_at")

    def has_add_permission(self, request):
        return False


class InputPackageInline(admin.StackedInline):
    model = InputPackage
    fk_name = "round"
    extra = 0
    fields = (
        "prompt_key",
        "task_lane",
        "variant_of",
        "content",
        "checklist",
        "sha256",
        "checklist_sha256",
    )
    readonly_fields = ("sha256", "checklist_sha256")

    def has_change_permission(self, request, obj=None):
        return obj is None or not obj.is_committed

    def has_add_permission(self, request, obj=None):
        return obj is None or not obj.is_committed

    def has_delete_permission(self, request, obj=None):
        return obj is None or not obj.is_committed


class EntryInline(admin.TabularInline):
    model = Entry
    extra = 0
    fields = (
        "system_version",
        "label",
        "path",
        "auditor_name",
        "provider_config",
        "provider_watermark",
    )
    readonly_fields = ("label",)

    def has_add_permission(self, request, obj=None):
        return obj is None or not obj.is_committed

    def has_change_permission(self, request, obj=None):
        return obj is None or not obj.is_committed

    def has_delete_permission(self, request, obj=None):
        return obj is None or not obj.is_committed


@admin.register(Round)
class RoundAdmin(admin.ModelAdmin):
    list_display = (
        "slug",
        "title",
        "protocol_version",
        "duration_class",
        "benchmark_class",
        "state",
        "committed_at",
    )
    list_filter = ("state", "benchmark_class", "duration_class", "protocol_version")
    list_select_related = ("protocol_version",)
    prepopulated_fields = {"slug": ("title",)}
    inlines = [EntryInline, InputPackageInline]
    actions = [
        "commit",
        "open_round",
        "start_judging",
        lock_judgments,
        reveal_identities,
        recompute_results,
        "cancel",
    ]

    def get_readonly_fields(self, request, obj=None):
        base = ["state", "controls_sha256", "committed_at", "opened_at", "revealed_at"]
        if obj is not None and obj.is_committed:
            frozen = [f.removesuffix("_id") for f in Round.FROZEN_FIELDS]
            return base + frozen + ["slug"]
        return base

    def save_formset(self, request, form, formset, change):
        instances = formset.save(commit=False)
        for instance in instances:
            if isinstance(instance, Entry) and not instance.label:
                instance.label = services.new_entry_label()
            instance.save()
        for obj in formset.deleted_objects:
            obj.delete()
        formset.save_m2m()

    @admin.action(description="Commit: freeze controls and packages, log their hashes")
    def commit(self, request, queryset):
        report_action(
            self,
            request,
            lambda r: services.round_commit(round_=r, actor=request.user.get_username()),
            queryset,
            "round(s) committed",
        )

    @admin.action(description="Open: runs may operate, package text becomes public")
    def open_round(self, request, queryset):
        report_action(
            self,
            request,
            lambda r: services.round_open(round_=r, actor=request.user.get_username()),
            queryset,
            "round(s) opened",
        )

    @admin.action(description="Start judging")
    def start_judging(self, request, queryset):
        report_action(
            self,
            request,
            lambda r: services.round_transition(
                round_=r, to=Round.State.JUDGING, actor=request.user.get_username()
            ),
            queryset,
            "round(s) moved to judging",
        )

    @admin.action(description="Cancel round")
    def cancel(self, request, queryset):
        report_action(
            self,
            request,
            lambda r: services.round_transition(
                round_=r, to=Round.State.CANCELLED, actor=request.user.get_username()
            ),
            queryset,
            "round(s) cancelled",
        )


@admin.register(BudgetApproval)
class BudgetApprovalAdmin(ImmutableAdminMixin, admin.ModelAdmin):
    list_display = ("round", "owner_name", "approved_limit_credits", "approved_at", "log_index")
    fields = ("round", "approved_limit_credits")

    def save_model(self, request, obj, form, change):
        created = services.budget_approve(
            round_=obj.round, owner=request.user, limit_credits=obj.approved_limit_credits
        )
        obj.pk = created.pk


@admin.register(InputPackage)
class InputPackageAdmin(admin.ModelAdmin):
    list_display = (
        "round",
        "prompt_key",
        "task_lane",
        "sha256",
        "checklist_sha256",
        "committed_at",
    )
    list_select_related = ("round",)
    readonly_fields = ("sha256", "checklist_sha256", "committed_at")

    def has_change_permission(self, request, obj=None):
        return obj is None or obj.committed_at is None

    def has_delete_permission(self, request, obj=None):
        return obj is None or obj.committed_at is None


@admin.register(Entry)
class EntryAdmin(admin.ModelAdmin):
    list_display = ("round", "label", "system_version", "path", "provider_watermark")
    list_select_related = ("round", "system_version__system")
    readonly_fields = ("label", "gateway_token_hash", "committed_at")


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    can_delete = False
    fields = (
        "number",
        "state",
        "failure_code",
        "retry_reason",
        "cost",
        "provider_request_id_hash",
        "output_sha256",
        "submitted_at",
        "arrived_at",
        "ended_at",
    )
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


class HumanActionInline(admin.TabularInline):
    model = HumanAction
    extra = 0
    can_delete = False
    readonly_fields = ("action_class", "description", "actor", "occurred_at", "log_index")

    def has_add_permission(self, request, obj=None):
        return False


class EngineRequestInline(admin.TabularInline):
    model = EngineRequest
    extra = 0
    can_delete = False
    fields = (
        "state",
        "prompt",
        "generated_seconds",
        "used_in_film",
        "charged_credits",
        "provider_request_id_hash",
        "output_sha256",
        "error",
    )
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = (
        "public_id",
        "round_slug",
        "entry",
        "state",
        "final_state",
        "wall_time",
        "retries",
        "manifest_link",
    )
    list_filter = ("state", "final_state", "entry__round")
    list_select_related = ("entry__round",)
    inlines = [AttemptInline, HumanActionInline, EngineRequestInline]
    actions = ["invalidate", "operate"]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in Run._meta.fields]

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="Round")
    def round_slug(self, obj):
        return obj.entry.round.slug

    @admin.display(description="Wall time (s)")
    def wall_time(self, obj):
        return None if obj.wall_time_s is None else round(obj.wall_time_s, 1)

    @admin.display(description="Retries")
    def retries(self, obj):
        return obj.attempts.exclude(retry_reason="").count()

    @admin.display(description="Manifest")
    def manifest_link(self, obj):
        if obj.state != Run.State.FINISHED:
            return "-"
        return format_html('<a href="/api/v1/runs/{}/manifest.json">manifest</a>', obj.public_id)

    @admin.action(description="Invalidate (operator): keeps the run in the reliability data")
    def invalidate(self, request, queryset):
        report_action(
            self,
            request,
            lambda r: services.run_invalidate(
                run=r, reason="invalidated by staff in the admin", actor=request.user.get_username()
            ),
            queryset,
            "run(s) invalidated",
        )

    @admin.action(description="Operate: start the run workflow on a worker")
    def operate(self, request, queryset):
        from rounds.tasks import run_operate

        def go(run):
            run_operate.delay(run.pk)

        report_action(self, request, go, queryset, "run(s) queued")


@admin.register(HumanAction)
class HumanActionAdmin(ImmutableAdminMixin, admin.ModelAdmin):
    list_display = ("run", "action_class", "actor", "occurred_at", "log_index")
    fields = ("run", "action_class", "description", "occurred_at")

    def save_model(self, request, obj, form, change):
        created = services.human_action_record(
            run=obj.run,
            action_class=obj.action_class,
            description=obj.description,
            actor=request.user.get_username(),
            occurred_at=obj.occurred_at,
        )
        obj.pk = created.pk


@admin.register(RunManifest)
class RunManifestAdmin(ImmutableAdminMixin, admin.ModelAdmin):
    list_display = ("run", "sha256", "log_index", "created_at")
    readonly_fields = ("run", "document", "sha256", "supersedes", "log_index", "created_at")

    def has_add_permission(self, request):
        return False


@admin.register(EngineRequest)
class EngineRequestAdmin(admin.ModelAdmin):
    list_display = (
        "public_id",
        "entry",
        "state",
        "generated_seconds",
        "used_in_film",
        "charged_credits",
    )
    list_filter = ("state",)
    list_select_related = ("entry__round",)

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in EngineRequest._meta.fields]


@admin.register(GatewayLogRecord)
class GatewayLogRecordAdmin(ImmutableAdminMixin, admin.ModelAdmin):
    list_display = ("entry", "seq", "record_hash", "created_at")
    readonly_fields = ("entry", "seq", "event", "prev_hash", "record_hash", "created_at")

    def has_add_permission(self, request):
        return False
