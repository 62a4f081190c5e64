"""Automated critics are diagnostic only: their output can never enter a ranking.

(Protocol: Quality dimensions, "Use automated critics for diagnostic reports only. An
automated critic cannot decide the public rank.") Every frame built from diagnostics is
marked; every entry point of the ranking math (Bradley-Terry, scorecard totals) refuses a
marked frame. pandas carries ``attrs`` through copies, filters, renames and merges, so a
critic's table stays marked however it is reshaped.
"""

from __future__ import annotations

import pandas as pd

DIAGNOSTIC_ATTR = "duel_diagnostic_only"


class DiagnosticNotRankable(ValueError):
    """A diagnostic (an automated critic's output, a checklist tick) was given to the ranking."""


def mark_diagnostic(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """Mark ``frame`` as diagnostic-only data from ``source``; returns the same frame."""
    frame.attrs[DIAGNOSTIC_ATTR] = source
    return frame


def refuse_diagnostic(frame: pd.DataFrame, where: str) -> None:
    """Raise when ``frame`` carries diagnostic data."""
    source = frame.attrs.get(DIAGNOSTIC_ATTR)
    if source:
        raise DiagnosticNotRankable(
            f"{where} refuses diagnostic data from {source}: automated critics and checklist "
            "diagnostics are published beside the ranking, never inside it"
        )
