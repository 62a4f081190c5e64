"""Krippendorff's alpha against published worked examples.

1. Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability" (Annenberg School,
   repository.upenn.edu/asc_papers/43), example C: 4 observers x 12 units with missing
   values; published alpha = 0.743 (nominal), 0.815 (ordinal), 0.849 (interval),
   0.797 (ratio). The same values are asserted by the fast-krippendorff package's tests.
2. The worked example of Wikipedia's "Krippendorff's alpha" article (3 coders x 15 units):
   nominal 0.691, interval 0.811 (fast-krippendorff asserts 0.691358 and 0.810845).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stats import agreement

N = None
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
    [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
]
WIKIPEDIA = [
    [N, N, N, N, N, 3, 4, 1, 2, 1, 1, 3, 3, N, 3],
    [1, N, 2, 1, 3, 3, 4, 3, N, N, N, N, N, N, N],
    [N, N, 2, 1, 3, 4, 4, N, 2, 1, 1, 3, 3, N, 4],
]


@pytest.mark.parametrize(
    "level, published",
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)],
)
def test_krippendorff_2011_example(level: str, published: float) -> None:
    assert round(agreement.krippendorff_alpha(KRIPPENDORFF_2011, level), 3) == published


@pytest.mark.parametrize("level, published", [("nominal", 0.691358), ("interval", 0.810845)])
def test_wikipedia_example(level: str, published: float) -> None:
    assert round(agreement.krippendorff_alpha(WIKIPEDIA, level), 6) == published


def test_coincidence_matrix_of_the_2011_example() -> None:
    """By hand: o(1,1) = 3 (unit 1: three 1s, 6 pairs / 2) + 2 (unit 8: 6 pairs / 3)
    + 2 (unit 11: 2 pairs / 1) = 7; o(1,2) = 1/3 (unit 6) + 3/3 (unit 8) = 4/3; margins
    9, 13, 10, 5, 3 and n = 40 pairable values (unit 12 has a single value and drops out)."""
    counts, domain = agreement._value_counts(KRIPPENDORFF_2011, None)
    o = agreement.coincidence_matrix(counts)
    assert domain == [1, 2, 3, 4, 5]
    assert o.sum() == pytest.approx(40)
    assert o[0, 0] == pytest.approx(7)
    assert o[0, 1] == pytest.approx(4 / 3)
    assert o.sum(axis=1) == pytest.approx([9, 13, 10, 5, 3])
    assert o == pytest.approx(o.T)


def test_ordinal_labels_with_a_domain_match_numeric_ranks() -> None:
    names = {1: "very low", 2: "low", 3: "mid", 4: "high", 5: "very high"}
    labelled = [[names.get(v) if v else None for v in row] for row in KRIPPENDORFF_2011]
    alpha = agreement.krippendorff_alpha(
        labelled, "ordinal", value_domain=["very low", "low", "mid", "high", "very high"]
    )
    assert round(alpha, 3) == 0.815


def test_perfect_agreement_is_one_and_systematic_disagreement_is_negative() -> None:
    assert agreement.krippendorff_alpha([[1, 2, 3, 1], [1, 2, 3, 1]], "nominal") == 1.0
    assert agreement.krippendorff_alpha([[1, 2, 1, 2], [2, 1, 2, 1]], "nominal") < 0


def test_undefined_alpha_is_an_error() -> None:
    with pytest.raises(agreement.AgreementUndefined):
        agreement.krippendorff_alpha([[3, 3], [3, 3]], "ordinal")
    with pytest.raises(agreement.AgreementUndefined):
        agreement.krippendorff_alpha([[1, N], [N, 2]], "nominal")


def test_long_table_gives_the_same_alpha() -> None:
    rows = [
        {"unit": u, "coder": c, "value": v}
        for c, row in enumerate(KRIPPENDORFF_2011)
        for u, v in enumerate(row)
        if v is not None
    ]
    frame = pd.DataFrame(rows).sample(frac=1.0, random_state=1)
    alpha = agreement.alpha_long(frame, unit="unit", coder="coder", value="value", level="ordinal")
    assert round(alpha, 3) == 0.815


def test_random_coding_is_near_zero() -> None:
    data = np.random.default_rng(0).integers(1, 6, (5, 400))
    assert abs(agreement.krippendorff_alpha(data, "ordinal")) < 0.05
