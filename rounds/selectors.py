"""Reads of rounds and runs that more than one caller needs."""

from __future__ import annotations

from django.db.models import QuerySet

from rounds.models import FinalState, Round, Run


def runs_of_round(round_: Round) -> QuerySet[Run]:
    """Every run of the round (the reliability dataset), with what listings show."""
    return (
        Run.objects.filter(entry__round=round_)
        .select_related("entry__system_version__system", "package", "proxy_file")
        .order_by("entry__label", "package__prompt_key", "created_at")
    )


def rankable_runs(round_: Round) -> list[Run]:
    """Runs whose outputs may enter the main ranking pool.

    Only conforming outputs with a review proxy, from entries that are not exhibitions
    (protocol: Duration classes, Human actions, Challenger path). Nonconforming and
    exhibition outputs stay in the reliability result only.
    """
    runs = runs_of_round(round_).filter(
        final_state=FinalState.COMPLETED_CONFORMING, proxy_file__isnull=False
    )
    return [run for run in runs if not run.is_exhibition]
