"""Staff admin for juries: jurors, panels, the jury plan and its actions. Thin: every action
calls one service; frozen and append-only records are read-only here (and in the database).

Planning a jury: create the panels and seat jurors (conflicts are excluded automatically),
write the story questions for each package, fill the jury plan (schedule rules, scale,
anchors, attention rule), then run "Freeze the plan" and "Plan screening sessions".
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages

from duel.admin_actions import report_action
from juries import services
from juries.models import (
    AttentionQuestion,
    Juror,
    JurorAffiliation,
    JuryFilm,
    JuryPlan,
    Panel,
    PanelMember,
    Scorecard,
    ScreeningSession,
    SegmentVote,
    SegmentWindow,
    Viewing,
)


def _actor(request) -> str:
    return f"staff:{request.user.get_username()}"


class ReadOnlyAdminMixin:
    """Records written only by services: staff read them, never add, change or delete."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


# ---------------------------------------------------------------------------
# Jurors


class JurorAffiliationInline(admin.TabularInline):
    model = JurorAffiliation
    extra = 1
    fields = ("party", "relationship", "note", "declared_at")
    readonly_fields = ("declared_at",)

    def has_delete_permission(self, request, obj=None):
        return False


class JurorAdminForm(forms.ModelForm):
    class Meta:
        model = Juror
        fields = [
            "user",
            "name",
            "contact",
            "expertise",
            "target_audience_fit",
            "compensation",
            "attrition_status",
            "attrition_reason",
        ]

    def clean(self):
        data = super().clean()
        status = data.get("attrition_status")
        previous = self.instance.attrition_status if self.instance.pk else Juror.Attrition.ACTIVE
        if status != previous:
            if not self.instance.pk:
                raise forms.ValidationError("a new juror is active")
            if previous != Juror.Attrition.ACTIVE:
                raise forms.ValidationError("attrition is recorded once and cannot be undone")
            if not (data.get("attrition_reason") or "").strip():
                raise forms.ValidationError("attrition needs a reason")
        return data


@admin.register(Juror)
class JurorAdmin(admin.ModelAdmin):
    form = JurorAdminForm
    list_display = ("public_id", "name", "expertise", "target_audience_fit", "attrition_status")
    list_filter = ("attrition_status",)
    search_fields = ("public_id", "name", "expertise")
    readonly_fields = ("public_id", "attrition_at", "created_at")
    fields = (
        "public_id",
        "user",
        "name",
        "contact",
        "expertise",
        "target_audience_fit",
        "compensation",
        "attrition_status",
        "attrition_reason",
        "attrition_at",
        "created_at",
    )
    inlines = [JurorAffiliationInline]

    def save_model(self, request, obj, form, change):
        # Attrition is a logged transition; the other fields are plain records.
        status = obj.attrition_status
        if change and "attrition_status" in form.changed_data:
            previous = Juror.objects.get(pk=obj.pk)
            obj.attrition_status = previous.attrition_status
            obj.attrition_reason = previous.attrition_reason
            super().save_model(request, obj, form, change)
            services.juror_attrition_record(
                juror=obj,
                status=status,
                reason=form.cleaned_data["attrition_reason"],
                actor=_actor(request),
            )
            obj.refresh_from_db()
            return
        if not change:
            obj.attrition_status = Juror.Attrition.ACTIVE
            obj.attrition_reason = ""
        super().save_model(request, obj, form, change)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        excluded = services.juror_conflicts_recheck(juror=form.instance, actor=_actor(request))
        for member in excluded:
            self.message_user(
                request,
                f"{form.instance} excluded from {member.panel}: conflict of interest.",
                level=messages.WARNING,
            )

    def has_delete_permission(self, request, obj=None):
        return False


# ---------------------------------------------------------------------------
# Panels


class PanelMemberInline(admin.TabularInline):
    model = PanelMember
    extra = 1
    fields = ("juror", "status", "exclusion_code", "exclusion_detail", "excluded_at")
    readonly_fields = ("status", "exclusion_code", "exclusion_detail", "excluded_at")
    autocomplete_fields = ("juror",)

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class PanelAdminForm(forms.ModelForm):
    class Meta:
        model = Panel
        fields = ["round", "kind"]

    def clean(self):
        data = super().clean()
        if not self.instance.pk and data.get("round") and data.get("kind"):
            problems = services.panel_problems(data["round"], data["kind"])
            if problems:
                raise forms.ValidationError(problems)
        return data


@admin.register(Panel)
class PanelAdmin(admin.ModelAdmin):
    form = PanelAdminForm
    list_display = ("round", "kind", "created_at")
    list_filter = ("kind",)
    inlines = [PanelMemberInline]
    actions = ["apply_conflicts"]

    def get_readonly_fields(self, request, obj=None):
        return ("round", "kind") if obj else ()

    def save_model(self, request, obj, form, change):
        if change:
            return
        created = services.panel_create(round_=obj.round, kind=obj.kind)
        obj.pk = created.pk

    def save_formset(self, request, form, formset, change):
        # New seats go through the service so conflicts are checked and logged at once.
        for member in formset.save(commit=False):
            if member.pk is None:
                seated = services.panel_member_add(
                    panel=form.instance, juror=member.juror, actor=_actor(request)
                )
                if seated.status == PanelMember.Status.EXCLUDED:
                    self.message_user(
                        request,
                        f"{seated.juror} excluded: conflict of interest "
                        f"({seated.exclusion_detail}).",
                        level=messages.WARNING,
                    )
        formset.save_m2m()

    @admin.action(description="Re-check conflicts of interest against the entrants")
    def apply_conflicts(self, request, queryset):
        report_action(
            self,
            request,
            lambda panel: services.round_conflicts_apply(round_=panel.round, actor=_actor(request)),
            queryset,
            "panel round(s) checked",
        )

    def has_delete_permission(self, request, obj=None):
        return False


# ---------------------------------------------------------------------------
# The jury plan and its actions


@admin.register(JuryPlan)
class JuryPlanAdmin(admin.ModelAdmin):
    list_display = ("round", "first_day", "session_cap", "daily_max", "frozen_at", "plan_sha256")
    actions = [
        "freeze_plan",
        "plan_sessions",
        "apply_conflicts",
        "publish_segment_windows",
        "lock_scorecards",
    ]
    fields = (
        "round",
        ("first_day", "day_start", "timezone"),
        ("session_cap", "break_length", "between_sessions", "daily_max"),
        "attention_min_correct",
        ("score_min", "score_max", "score_step"),
        "anchors",
        "attention_statement",
        "anchors_sha256",
        "plan_sha256",
        "order_seed",
        "frozen_at",
        "log_index",
    )

    def get_readonly_fields(self, request, obj=None):
        derived = (
            "attention_statement",
            "anchors_sha256",
            "plan_sha256",
            "order_seed",
            "frozen_at",
            "log_index",
        )
        if obj is not None and obj.is_frozen:
            return tuple(f for f in self.fields if isinstance(f, str)) + (
                "first_day",
                "day_start",
                "timezone",
                "session_cap",
                "break_length",
                "between_sessions",
                "daily_max",
                "score_min",
                "score_max",
                "score_step",
            )
        if obj is not None:
            return ("round", *derived)
        return derived

    def get_changeform_initial_data(self, request):
        return services.jury_plan_initial()

    def save_model(self, request, obj, form, change):
        services.jury_plan_draft_defaults(plan=obj)
        super().save_model(request, obj, form, change)

    @admin.action(description="Freeze the plan (anchors, attention rule, schedule) and log it")
    def freeze_plan(self, request, queryset):
        report_action(
            self,
            request,
            lambda plan: services.jury_plan_freeze(plan=plan, actor=_actor(request)),
            queryset,
            "plan(s) frozen",
        )

    @admin.action(description="Plan screening sessions (Williams orders, breaks, daily max)")
    def plan_sessions(self, request, queryset):
        report_action(
            self,
            request,
            lambda plan: services.sessions_plan(round_=plan.round, actor=_actor(request)),
            queryset,
            "round(s) scheduled",
        )

    @admin.action(description="Re-check conflicts of interest against the entrants")
    def apply_conflicts(self, request, queryset):
        report_action(
            self,
            request,
            lambda plan: services.round_conflicts_apply(round_=plan.round, actor=_actor(request)),
            queryset,
            "round(s) checked",
        )

    @admin.action(description="Publish the within-segment windows")
    def publish_segment_windows(self, request, queryset):
        report_action(
            self,
            request,
            lambda plan: services.segment_windows_publish(round_=plan.round, actor=_actor(request)),
            queryset,
            "round(s) published",
        )

    @admin.action(description="Lock every submitted scorecard (before the reveal)")
    def lock_scorecards(self, request, queryset):
        report_action(
            self,
            request,
            lambda plan: services.round_scorecards_lock(round_=plan.round, actor=_actor(request)),
            queryset,
            "round(s) locked",
        )

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(AttentionQuestion)
class AttentionQuestionAdmin(admin.ModelAdmin):
    list_display = ("text", "package", "correct_choice", "frozen_at")
    list_filter = ("package__round",)
    fields = ("package", "text", "choices", "correct_choice", "frozen_at")

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.frozen_at is not None:
            return self.fields
        return ("frozen_at",)

    def has_delete_permission(self, request, obj=None):
        return obj is None or obj.frozen_at is None


# ---------------------------------------------------------------------------
# Records written by services


@admin.register(JuryFilm)
class JuryFilmAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("round", "package", "entry", "task_label", "duration_s", "proxy_sha256")
    list_filter = ("round",)


class ViewingInline(admin.TabularInline):
    model = Viewing
    extra = 0
    fields = ("order_index", "film", "started_at", "completed_at", "coverage", "reached_ending")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(ScreeningSession)
class ScreeningSessionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("juror", "round", "panel", "index", "day", "scheduled_start", "scheduled_end")
    list_filter = ("round", "panel__kind")
    inlines = [ViewingInline]


@admin.register(Scorecard)
class ScorecardAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("public_id", "round", "panel", "juror", "film", "locked_at", "sha256")
    list_filter = ("round", "panel__kind")


@admin.register(SegmentWindow)
class SegmentWindowAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("round", "film", "kind", "index", "start_s", "end_s", "log_index")
    list_filter = ("round", "kind")


@admin.register(SegmentVote)
class SegmentVoteAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("round", "panel", "juror", "window_a", "window_b", "outcome", "created_at")
    list_filter = ("round",)
