"""Inter-rater agreement: Krippendorff's alpha from the coincidence matrix.

Protocol, "Quality dimensions": "Publish inter-rater agreement." Jury dimension scores are
ordinal (``level="ordinal"``); paired choices are nominal (``level="nominal"``).

Definition (Krippendorff, "Computing Krippendorff's Alpha-Reliability", 2011; Content Analysis,
ch. 12): for every unit with ``m_u >= 2`` pairable values, each ordered pair of values from
different coders adds ``1 / (m_u - 1)`` to the coincidence matrix ``o[c, k]``; ``n_c`` are its
margins and ``n`` its total. Then

    alpha = 1 - D_o / D_e = 1 - (n - 1) * sum o[c,k] d2(c,k) / sum n_c n_k d2(c,k)

with the difference function ``d2``: nominal ``[c != k]``; ordinal
``(sum_{g=c..k} n_g - (n_c + n_k) / 2) ** 2`` over the ranked values; interval ``(c - k) ** 2``;
ratio ``((c - k) / (c + k)) ** 2``. Values held by a single coder of a unit are not pairable and
drop out, as in the definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[str, ...] = ("nominal", "ordinal", "interval", "ratio")


class AgreementUndefined(ValueError):
    """Alpha is undefined: no pairable values, or no variation at all (expected disagreement
    is zero)."""


def _value_counts(data: Any, domain: Sequence[Any] | None) -> tuple[np.ndarray, list[Any]]:
    """Units x values count matrix from coders x units reliability data (missing = NaN/None)."""
    frame = pd.DataFrame(data)
    long = frame.stack(future_stack=True)
    long = long[long.notna()]
    unit = long.index.get_level_values(1)
    values = long.to_numpy()
    if domain is None:
        domain_list = sorted(pd.unique(values).tolist())
    else:
        domain_list = list(domain)
        outside = set(values.tolist()) - set(domain_list)
        if outside:
            raise ValueError(f"values outside the given domain: {sorted(outside, key=repr)}")
    value_index = {v: k for k, v in enumerate(domain_list)}
    unit_codes, _ = pd.factorize(unit)
    counts = np.zeros((int(unit_codes.max(initial=-1)) + 1, len(domain_list)))
    np.add.at(counts, (unit_codes, [value_index[v] for v in values]), 1.0)
    return counts, domain_list


def coincidence_matrix(value_counts: np.ndarray) -> np.ndarray:
    """Coincidences from a units x values count matrix; units with fewer than two values drop."""
    counts = np.asarray(value_counts, dtype=float)
    m_u = counts.sum(axis=1)
    pairable = counts[m_u >= 2]
    weight = 1.0 / (pairable.sum(axis=1) - 1.0)
    scaled = pairable * weight[:, None]
    return scaled.T @ pairable - np.diag(scaled.sum(axis=0))


def difference_squared(level: Level, values: Sequence[Any], margins: np.ndarray) -> np.ndarray:
    """The metric difference ``d2(c, k)`` for every pair of domain values."""
    v = len(values)
    if level == "nominal":
        return 1.0 - np.eye(v)
    if level == "ordinal":
        cumulative = np.concatenate([[0.0], np.cumsum(margins)])
        c, k = np.meshgrid(np.arange(v), np.arange(v), indexing="ij")
        lo, hi = np.minimum(c, k), np.maximum(c, k)
        between = cumulative[hi + 1] - cumulative[lo]
        return (between - (margins[c] + margins[k]) / 2.0) ** 2
    x = np.asarray(values, dtype=float)
    if level == "interval":
        return (x[:, None] - x[None, :]) ** 2
    if level == "ratio":
        total = x[:, None] + x[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.where(total == 0, 0.0, (x[:, None] - x[None, :]) / total)
        return d**2
    raise ValueError(f"level must be one of {LEVELS}")


def krippendorff_alpha(
    reliability_data: Any,
    level: Level = "nominal",
    *,
    value_domain: Sequence[Any] | None = None,
) -> float:
    """Krippendorff's alpha for coders x units data (rows coders, columns units; NaN/None for
    a missing value).

    ``value_domain`` fixes the value order (needed for ordinal labels that are not numbers);
    by default the sorted distinct values. Raises :class:`AgreementUndefined` when no unit has
    two values or all pairable values are equal.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}")
    counts, domain = _value_counts(reliability_data, value_domain)
    return alpha_from_counts(counts, domain, level)


def alpha_from_counts(value_counts: np.ndarray, domain: Sequence[Any], level: Level) -> float:
    """Alpha from a units x values count matrix (``domain`` labels the columns)."""
    o = coincidence_matrix(value_counts)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    if n <= 1:
        raise AgreementUndefined("no unit has two or more pairable values")
    d2 = difference_squared(level, domain, n_c)
    expected = (np.outer(n_c, n_c) * d2).sum()
    if expected == 0:
        raise AgreementUndefined("every pairable value is the same: alpha is undefined")
    return float(1.0 - (n - 1.0) * (o * d2).sum() / expected)


def alpha_long(
    frame: pd.DataFrame,
    *,
    unit: str | Sequence[str],
    coder: str,
    value: str,
    level: Level,
    value_domain: Sequence[Any] | None = None,
) -> float:
    """Alpha from a long table (one row per coder's value for a unit), e.g. jury scorecards
    with unit = (prompt, run, dimension), coder = juror, value = score."""
    units = [unit] if isinstance(unit, str) else list(unit)
    dup = frame.duplicated(units + [coder])
    if dup.any():
        raise ValueError("a coder has two values for one unit")
    wide = frame.set_index(units + [coder])[value].astype(object).unstack(coder)
    # rows are units, columns coders: transpose to coders x units
    return krippendorff_alpha(wide.T.to_numpy(dtype=object), level, value_domain=value_domain)
