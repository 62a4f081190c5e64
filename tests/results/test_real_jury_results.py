"""Jury results from real scorecards: jurors watch, answer and score through the juries
services, and the results read the juries app's own frames."""

from __future__ import annotations

import json

import pytest

from stats import results, selectors, services
from tests.juries.conftest import (  # noqa: F401 - fixtures of the juries tests, reused here
    jury_round,
    one_second_film,
    plan_jury,
    screening,
)
from tests.results.conftest import to_judging

pytestmark = pytest.mark.django_db


def test_results_of_a_jury_round_come_from_locked_scorecards(
    jury_round,  # noqa: F811
    plan_jury,  # noqa: F811
    screening,  # noqa: F811
):
    round_ = jury_round(duration_class="minute_5", entries=2, packages=1)
    _plan, seated = plan_jury(round_, jurors={"audience": 2})
    round_ = to_judging(round_)
    for juror in seated["audience"]:
        screening.complete_all(juror)
    round_ = services.round_lock(round_=round_, actor="staff")
    outcome = services.results_ensure(round_=round_)
    assert outcome.unavailable == {}
    dims = outcome.snapshots[results.JURY_DIMENSIONS]
    panel = dims.result["panels"][0]
    assert panel["panel"] == "audience" and panel["counts"]["jurors"] == 2
    assert panel["complete_view_jurors"] == 2 and panel["descriptive"] is True
    assert len(panel["dimensions"]) == len(round_.protocol.quality_dimensions)
    inputs = json.loads(dims.inputs)
    assert {row[2] for row in inputs["tables"]["scores"]["rows"]} == {"audience"}
    choices = outcome.snapshots[results.HOLISTIC_CHOICE].result
    assert choices["panels"][0]["counts"]["choices"] == 2  # one per juror for the second film
    assert selectors.snapshot_recheck(dims).ok
