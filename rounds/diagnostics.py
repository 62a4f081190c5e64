"""Reads of the diagnostics published beside the ranking: checklist adherence, critics."""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from rounds.models import ChecklistTick, CriticReport, Round
from stats.diagnostic_guard import mark_diagnostic


def checklist_diagnostics(round_: Round) -> list[dict]:
    """Per film (anonymous label, prompt) and requirement: how many reviewers found it met."""
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    ticks = ChecklistTick.objects.filter(run__entry__round=round_).select_related(
        "run__entry", "run__package"
    )
    for tick in ticks:
        key = (tick.run.entry.label, tick.run.package.prompt_key, tick.item_id)
        counts[key][0] += int(tick.met)
        counts[key][1] += 1
    return [
        {
            "entry": e,
            "prompt": p,
            "item": i,
            "met": met,
            "reviewers": total,
            "share_met": met / total,
        }
        for (e, p, i), (met, total) in sorted(counts.items())
    ]


def critic_frame(round_: Round) -> pd.DataFrame:
    """Automated critics' reports as a table, marked diagnostic-only (no ranking accepts it)."""
    rows = [
        {
            "entry": report.run.entry.label,
            "prompt": report.run.package.prompt_key,
            "run": str(report.run.public_id),
            "critic": report.critic,
            "critic_version": report.critic_version,
            **{f"report.{k}": v for k, v in report.report.items()},
        }
        for report in CriticReport.objects.filter(run__entry__round=round_).select_related(
            "run__entry", "run__package"
        )
    ]
    return mark_diagnostic(pd.DataFrame(rows), "automated critics")
