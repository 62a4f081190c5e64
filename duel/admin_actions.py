"""Admin plumbing shared by every app: run a service over a selection, report plainly."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db import IntegrityError


def report_action(modeladmin, request, fn: Callable, queryset: Iterable, done: str) -> None:
    """Call ``fn`` on each selected object; a refused one shows its reason, the rest proceed."""
    ok = 0
    for obj in queryset:
        try:
            fn(obj)
            ok += 1
        except (ValidationError, IntegrityError) as exc:
            text = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
            modeladmin.message_user(request, f"{obj}: {text}", level=messages.ERROR)
    if ok:
        modeladmin.message_user(request, f"{ok} {done}.", level=messages.SUCCESS)
