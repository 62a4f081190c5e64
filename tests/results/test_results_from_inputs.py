"""stats.results and stats.plots on hand-made inputs documents: no database."""

from __future__ import annotations

import csv
import io
import math
from fractions import Fraction

import pytest

from rounds.protocols import Protocol
from stats import bradley_terry as bt
from stats import plots, results

DEFINITION = Protocol.load("ai-duel-0.1").definition
SECTIONS = ("final_states", "publication_levels", "bootstrap_clusters", "jury", "cost_fields")


def inputs_for(runs: list[dict], ballots: list[dict], *, n_replicates: int = 200) -> dict:
    return {
        "format": results.INPUTS_FORMAT,
        "method": results.METHOD,
        "round": "r",
        "result_kind": results.FULL_FILM_VOTES,
        "protocol": {"key": "ai-duel-0.1"},
        "definition": {k: DEFINITION[k] for k in SECTIONS},
        "pool": {
            "duration_class": "minute_1",
            "prompt_track": "brief_to_film",
            "interaction_class": "autonomous",
            "source_asset_policy": "no_uploaded_media",
            "benchmark_class": "best_complete_system",
        },
        "parameters": {
            "seed": 7,
            "n_replicates": n_replicates,
            "level": 0.95,
            "display_scale": {
                "anchor": bt.DISPLAY_ANCHOR,
                "points_per_natural_log": bt.DISPLAY_POINTS_PER_NATURAL_LOG,
            },
        },
        "tables": {
            "runs": results.table(runs, "runs"),
            "ballots": results.table(ballots, "ballots"),
        },
    }


def run(run_id: str, label: str, prompt: str, state="completed_conforming", **kw) -> dict:
    return {
        "run": run_id,
        "label": label,
        "prompt": prompt,
        "final_state": state,
        "exhibition": kw.get("exhibition", False),
        "has_proxy": kw.get("has_proxy", True),
    }


def ballot(k: int, a: str, b: str, outcome: str, prompt: str = "P1") -> dict:
    return {
        "ballot_id": f"b{k:04d}",
        "sha256": "0" * 64,
        "prompt": prompt,
        "voter": f"v{k % 7}",
        "run_a": f"{a}-{prompt}",
        "run_b": f"{b}-{prompt}",
        "a": a,
        "b": b,
        "outcome": outcome,
        "synthetic": False,
    }


def three_systems(prompts=("P1", "P2", "P3")) -> tuple[list[dict], list[dict]]:
    runs = [run(f"{s}-{p}", s, p) for s in "ABC" for p in prompts]
    ballots = []
    k = 0
    for p in prompts:
        for a, b, wins_a, wins_b in (("A", "B", 6, 3), ("A", "C", 7, 2), ("B", "C", 5, 4)):
            for _ in range(wins_a):
                ballots.append(ballot(k, a, b, "a", p))
                k += 1
            for _ in range(wins_b):
                ballots.append(ballot(k, a, b, "b", p))
                k += 1
    return runs, ballots


def test_votes_result_rates_best_first_and_is_deterministic():
    runs, ballots = three_systems()
    inputs = inputs_for(runs, ballots)
    result = results.compute_result(inputs)
    assert result["status"] == "ok"
    assert [r["label"] for r in result["systems"]] == ["A", "B", "C"]
    assert result["systems"][0]["rating"] > 1000 > result["systems"][2]["rating"]
    assert result["win_matrix"]["systems"] == ["A", "B", "C"]
    assert result["win_matrix"]["wins"][0][1] == 18  # A over B, three prompts of 6
    assert result["publication"]["key"] == "pilot"  # 27+ votes each, below 100
    assert result["bootstrap"]["clusters"] == ["prompt", "run"]
    assert len(result["prompt_sensitivity"]["left_out"]) == 3
    assert results.compute_result(inputs) == result  # the seed makes it reproducible


def test_nonconforming_exhibition_and_unproxied_runs_stay_out():
    runs, ballots = three_systems(("P1", "P2"))
    runs = [r for r in runs if r["label"] != "C"] + [
        run("C-P1", "C", "P1", state="completed_nonconforming"),
        run("C-P2", "C", "P2", exhibition=True),
    ]
    result = results.compute_result(inputs_for(runs, ballots))
    assert [r["label"] for r in result["systems"]] == ["A", "B"]
    assert result["counts"]["ballots_outside_main_ranking"] == 2 * (9 + 9)
    assert result["publication"]["key"] == "head_to_head"

    runs[0]["has_proxy"] = False  # A-P1 was never proxied: it cannot have been judged
    allowed, systems = results.main_runs(inputs_for(runs, ballots))
    assert "A-P1" not in allowed and systems == ["A", "B"]


def test_one_qualified_system_is_an_open_record():
    runs = [run("A-P1", "A", "P1"), run("B-P1", "B", "P1", state="provider_failed")]
    result = results.compute_result(inputs_for(runs, []))
    assert result["publication"]["key"] == "open_record"
    assert (
        result["publication"]["statement"]
        == DEFINITION["publication_levels"]["open_record_statement"]
    )
    assert result["systems"][0]["rating"] is None


def test_a_system_that_never_lost_has_no_rating_but_keeps_its_label():
    runs, _ = three_systems(("P1",))
    ballots = [ballot(k, "A", "B", "a") for k in range(5)] + [
        ballot(10 + k, "B", "C", "a" if k % 2 else "b") for k in range(4)
    ]
    result = results.compute_result(inputs_for(runs, ballots))
    assert result["status"] == "not_estimable"
    assert "never lost" in result["reason"]
    assert all(r["rating"] is None for r in result["systems"])
    assert {r["label"]: r["counts"]["votes"] for r in result["systems"]} == {
        "A": 5,
        "B": 9,
        "C": 4,
    }


def test_unknown_final_state_and_foreign_documents_are_refused():
    runs, ballots = three_systems(("P1",))
    runs[0]["final_state"] = "vanished"
    with pytest.raises(ValueError, match="unknown or missing final state"):
        results.compute_result(inputs_for(runs, ballots))
    inputs = inputs_for(*three_systems(("P1",)))
    with pytest.raises(results.InvalidInputs, match="method"):
        results.compute_result({**inputs, "method": "someone-else/9"})
    with pytest.raises(results.InvalidInputs, match="format"):
        results.compute_result({**inputs, "format": "x"})


def test_compare_results_uses_a_tolerance_for_floats_only():
    a = {"x": 1.0, "rows": [{"label": "A", "n": 3}], "text": "same"}
    assert (
        results.compare_results(
            a, {"x": 1.0 + 1e-12, "rows": [{"label": "A", "n": 3}], "text": "same"}
        )
        == []
    )
    assert results.compare_results(
        a, {"x": 1.1, "rows": [{"label": "A", "n": 3}], "text": "same"}
    ) == ["/x: 1.0 vs 1.1"]
    assert results.compare_results(
        a, {"x": 1.0, "rows": [{"label": "B", "n": 3}], "text": "same"}
    ) == ["/rows[0]/label: 'A' vs 'B'"]
    assert results.compare_results(a, {"x": 1.0, "rows": [], "text": "same"}) == [
        "/rows: 1 items vs 0"
    ]


def test_clean_makes_results_json_safe():
    cleaned = results.clean({"nan": float("nan"), "f": Fraction(1, 3), "t": (1, 2.0000000001)})
    assert cleaned == {"nan": None, "f": "1/3", "t": [1, 2.0]}


def test_table_csv_writes_columns_in_order_and_booleans_as_words():
    runs = [run("A-P1", "A", "P1", exhibition=True)]
    text = results.table_csv({"tables": {"runs": results.table(runs, "runs")}}, "runs")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows == [
        list(results.TABLE_COLUMNS["runs"]),
        ["A-P1", "A", "P1", "completed_conforming", "true", "true"],
    ]


def test_interval_plot_escapes_labels_and_marks_missing_ratings():
    svg = plots.interval_plot_svg(
        [
            plots.IntervalRow("<b>A</b>", 1100.0, 1050.0, 1150.0),
            plots.IntervalRow("B", None, None, None),
        ],
        title="Ratings & intervals",
    )
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "<b>" not in svg and "&lt;b&gt;A&lt;/b&gt;" in svg
    assert "Ratings &amp; intervals" in svg
    assert "no rating" in svg
    assert svg.count("<circle") == 1 and svg.count('stroke-width="4"') == 1
    assert not math.isnan(float(svg.split('cx="')[1].split('"')[0]))
