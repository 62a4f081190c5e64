"""Admin actions for rounds, as plain functions (the lead adds them to ``RoundAdmin.actions``).

Thin: each calls one service per selected round and reports what happened, errors included,
as admin messages.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError

from stats import selectors, services


def _report(modeladmin, request, queryset, action, done: str) -> None:
    ok = 0
    for round_ in queryset:
        try:
            action(round_)
            ok += 1
        except PermissionDenied as exc:
            modeladmin.message_user(request, f"{round_}: {exc}", level=messages.ERROR)
        except (ValidationError, IntegrityError) as exc:
            text = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
            modeladmin.message_user(request, f"{round_}: {text}", level=messages.ERROR)
    if ok:
        modeladmin.message_user(request, f"{ok} {done}.", level=messages.SUCCESS)


@admin.action(description="Lock judgments (needs every ballot and scorecard locked)")
def lock_judgments(modeladmin, request, queryset) -> None:
    _report(
        modeladmin,
        request,
        queryset,
        lambda r: services.round_lock(round_=r, actor=request.user.get_username()),
        "round(s) locked",
    )


@admin.action(
    description="Reveal identities (needs the reveal permission and a locked round; logged)"
)
def reveal_identities(modeladmin, request, queryset) -> None:
    def reveal(round_) -> None:
        services.round_reveal(round_=round_, user=request.user)
        check = selectors.verify_reveal(round_)
        if not check.ok:
            modeladmin.message_user(
                request,
                f"{round_}: revealed, but the check failed: {'; '.join(check.problems)}",
                level=messages.ERROR,
            )

    _report(modeladmin, request, queryset, reveal, "round(s) revealed")


@admin.action(description="Recompute results (a new snapshot where the inputs changed)")
def recompute_results(modeladmin, request, queryset) -> None:
    def recompute(round_) -> None:
        outcome = services.results_recompute(round_=round_, actor=request.user.get_username())
        parts = []
        for kind, snapshot, created in outcome:
            if snapshot is None:
                parts.append(f"{kind}: unavailable")
            else:
                parts.append(f"{kind}: {'new snapshot' if created else 'unchanged'} #{snapshot.pk}")
        modeladmin.message_user(request, f"{round_}: {', '.join(parts)}", level=messages.INFO)

    _report(modeladmin, request, queryset, recompute, "round(s) recomputed")
