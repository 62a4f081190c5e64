"""Jury, segment and Tovaki scorecard results, from frames in the juries app's exact columns.

The frames are built here (``juries.selectors`` column lists) and served in place of the
juries app's readers, so each test controls every score, exclusion and lock.
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from django.test import Client

from juries import selectors as jury_selectors
from stats import bootstrap as bs
from stats import jury_results, results, scorecards, services
from tests.results.conftest import to_judging

pytestmark = pytest.mark.django_db

QUALITY = [4.0, 3.0, 2.0]  # entry index -> true mean score


def _films(made):
    """(run id, label, prompt, task lane) of every run, by (entry, package) index."""
    return {
        key: (str(run.public_id), run.entry.label, run.package.prompt_key, run.package.task_lane)
        for key, run in made.runs.items()
    }


def scores_frame(made, panels: dict[str, int], dims: list[str], *, seed: int = 0):
    rng = np.random.default_rng(seed)
    rows = []
    films = _films(made)
    for panel, count in panels.items():
        for j in range(count):
            juror = f"{panel[:2]}-juror-{j}"
            for (e, p), (run, label, prompt, lane) in films.items():
                card = f"{panel}-{j}-{e}-{p}"
                for dim in dims:
                    score = float(np.clip(QUALITY[e] + rng.choice([-0.5, 0, 0.5]), 0, 5))
                    rows.append(
                        (card, juror, panel, prompt, lane, run, label, dim, score, True, False, "")
                    )
    # An excluded juror who scores the best system 0, and a draft (unlocked) scorecard.
    e, p = 0, 0
    run, label, prompt, lane = films[(e, p)]
    for dim in dims:
        rows.append(
            (
                "x",
                "conflicted",
                "audience",
                prompt,
                lane,
                run,
                label,
                dim,
                0.0,
                True,
                True,
                "conflict_of_interest",
            )
        )
        rows.append(
            ("d", "drafting", "audience", prompt, lane, run, label, dim, 0.0, False, False, "")
        )
    return pd.DataFrame(rows, columns=jury_selectors.SCORECARD_COLUMNS)


def choices_frame(made, panels: dict[str, int], *, seed: int = 0):
    rng = np.random.default_rng(seed)
    films = _films(made)
    rows = []
    prompts = sorted({k[1] for k in films})
    for panel, count in panels.items():
        for j in range(count):
            for p in prompts:
                for e1, e2 in itertools.combinations(range(len(made.entries)), 2):
                    if (e1, p) not in films or (e2, p) not in films:
                        continue
                    a, b = films[(e1, p)], films[(e2, p)]
                    p_a = 1 / (1 + np.exp(QUALITY[e2] - QUALITY[e1]))
                    outcome = "a" if rng.random() < p_a else "b"
                    rows.append(
                        (
                            f"{panel}-{j}",
                            panel,
                            a[2],
                            a[0],
                            b[0],
                            a[1],
                            b[1],
                            outcome,
                            False,
                            "",
                            True,
                        )
                    )
    return pd.DataFrame(rows, columns=jury_selectors.HOLISTIC_COLUMNS)


def segment_frame(made, voters: int, segments: int, *, seed: int = 0):
    rng = np.random.default_rng(seed)
    films = _films(made)
    rows = []
    prompts = sorted({k[1] for k in films})
    for v in range(voters):
        for p in prompts:
            for s in range(segments):
                for e1, e2 in itertools.combinations(range(len(made.entries)), 2):
                    a, b = films[(e1, p)], films[(e2, p)]
                    p_a = 1 / (1 + np.exp(QUALITY[e2] - QUALITY[e1]))
                    outcome = "a" if rng.random() < p_a else "b"
                    rows.append(
                        (f"v{v}", "audience", a[2], a[0], b[0], a[1], b[1], s, outcome, False, "")
                    )
    return pd.DataFrame(rows, columns=jury_selectors.SEGMENT_VOTE_COLUMNS)


@pytest.fixture
def jury_made(results_round, monkeypatch):
    """A five-minute round (3 entries, 3 prompts, one nonconforming run) whose jury frames are
    served from the frames above."""
    made = results_round(entries=3, packages=3, duration_class="minute_5", nonconforming=[(2, 2)])
    dims = made.round.protocol.quality_dimensions
    frames = {
        "scores": scores_frame(made, {"audience": 4, "craft": 3}, dims),
        "choices": choices_frame(made, {"audience": 4, "craft": 3}),
        "segments": segment_frame(made, voters=3, segments=2),
    }
    monkeypatch.setattr(jury_selectors, "scorecards_frame", lambda r: frames["scores"])
    monkeypatch.setattr(jury_selectors, "holistic_choices_frame", lambda r: frames["choices"])
    monkeypatch.setattr(jury_selectors, "segment_votes_frame", lambda r: frames["segments"])
    counts = {"audience": 4, "craft": 3}
    monkeypatch.setattr(
        jury_selectors,
        "complete_view_counts",
        lambda r, panel=None: {e.label: counts[panel] for e in made.entries},
    )
    made.frames = frames
    return made


def _valid_main(frame, made):
    excluded = str(made.runs[(2, 2)].public_id)
    keep = frame["locked"] & ~frame["excluded"] & (frame["run"] != excluded)
    return frame[keep]


def test_dimensions_are_published_per_panel_and_per_dimension(jury_made):
    made = jury_made
    snapshot = services.result_compute(round_=made.round, result_kind=results.JURY_DIMENSIONS)
    result = snapshot.result
    assert [p["panel"] for p in result["panels"]] == ["audience", "craft"]
    dims = made.round.protocol.quality_dimensions
    valid = _valid_main(made.frames["scores"], made)
    for panel in result["panels"]:
        assert [d["dimension"] for d in panel["dimensions"]] == dims
        # Below the protocol's 25 complete-view jurors for five minutes: descriptive.
        assert panel["descriptive"] is True and panel["minimum_complete_view"] == 25
        expected = jury_results.dimension_results(
            valid[valid["panel"] == panel["panel"]],
            bs.bootstrap_clusters(made.round.protocol, "full_film"),
            seed=snapshot.seed,
        )
        for dim in panel["dimensions"]:
            for row in dim["systems"]:
                want = expected[
                    (expected["dimension"] == dim["dimension"])
                    & (expected["system"] == row["label"])
                ].iloc[0]
                assert row["mean"] == pytest.approx(want["mean"])
                assert row["lower"] == pytest.approx(want["lower"])
                assert row["lower"] <= row["mean"] <= row["upper"]
            assert dim["krippendorff_alpha_ordinal"] is not None
    audience = result["panels"][0]
    # The excluded juror and the draft scorecard are not in the result.
    assert audience["counts"]["jurors"] == 4
    best = audience["dimensions"][0]["systems"][0]
    assert best["label"] == made.entries[0].label and best["mean"] > 3.5
    assert result["counts"]["scores_outside_main_ranking"] > 0
    assert "no weighted composite" in result["statement"]


def test_holistic_choice_has_ratings_agreement_power_and_a_descriptive_label(jury_made):
    made = jury_made
    snapshot = services.result_compute(round_=made.round, result_kind=results.HOLISTIC_CHOICE)
    result = snapshot.result
    assert [p["panel"] for p in result["panels"]] == ["audience", "craft"]
    for panel in result["panels"]:
        assert panel["status"] == "ok"
        assert panel["publication"]["key"] == "descriptive"
        assert any("complete-view jurors" in r for r in panel["publication"]["reasons"])
        assert panel["power"]["alpha"] == 0.05 and panel["power"]["supported"] is False
        assert panel["power"]["direct_choices"] > 0
        assert panel["counts"]["complete_view_jurors"] == (4 if panel["panel"] == "audience" else 3)
        labels = {row["label"] for row in panel["systems"]}
        assert labels == {e.label for e in made.entries}
    assert results.compute_result(json.loads(snapshot.inputs)) == result


def test_segment_result_is_separate_and_says_what_it_measures(jury_made):
    made = jury_made
    snapshot = services.result_compute(round_=made.round, result_kind=results.SEGMENT)
    result = snapshot.result
    assert "within-segment quality" in result["title"]
    assert "does not measure full story quality" in result["statement"]
    panel = result["panels"][0]
    assert panel["bootstrap"]["clusters"] == ["prompt", "run", "segment", "voter"]
    assert panel["systems"][0]["label"] == made.entries[0].label
    # Votes involving the nonconforming run are left out.
    assert result["counts"]["votes_outside_main_ranking"] > 0


def test_jury_round_page_renders_every_kind(jury_made):
    made = jury_made
    services.round_lock(round_=to_judging(made.round), actor="staff")
    page = Client().get(f"/results/{made.round.slug}/").content.decode()
    for title in (
        "quality dimensions (juries)",
        "holistic paired choice",
        "within-segment quality",
        "Reliability result",
        "descriptive",
        "Krippendorff",
        "Story structure and ending",
    ):
        assert title in page, title


def _tovaki_scores(made, reviewers: int, totals_gap: str) -> pd.DataFrame:
    """Scores in half steps: entry 0 leads entry 1 by a small or a large margin."""
    dims = made.round.protocol.quality_dimensions
    base = {0: 4.0, 1: 4.0 if totals_gap == "close" else 3.0, 2: 2.0, 3: 2.5}
    rows = []
    for (e, _p), (run, label, prompt, lane) in _films(made).items():
        for r in range(reviewers):
            for k, dim in enumerate(dims):
                score = base[e] + (0.5 if (e == 0 and k == 0 and r == 0) else 0.0)
                if e == 2 and k == 1:
                    score = [0.0, 3.5, 1.0][r]  # reviewers disagree by 3.5 points
                rows.append(
                    (
                        f"{e}{r}{prompt}",
                        f"rev-{r}",
                        "craft",
                        prompt,
                        lane,
                        run,
                        label,
                        dim,
                        score,
                        True,
                        False,
                        "",
                    )
                )
    return pd.DataFrame(rows, columns=jury_selectors.SCORECARD_COLUMNS)


@pytest.mark.parametrize("gap", ["close", "clear"])
def test_tovaki_totals_close_result_rule_and_scope_language(results_round, monkeypatch, gap):
    made = results_round(protocol="tovaki-2026-r1", duration_class="clip_6s")
    frame = _tovaki_scores(made, reviewers=3, totals_gap=gap)
    monkeypatch.setattr(jury_selectors, "scorecards_frame", lambda r: frame)
    assert services.results_ensure(round_=made.round).snapshots  # computed, nothing unavailable
    snapshot = services.result_compute(round_=made.round, result_kind=results.TOVAKI_SCORECARDS)
    result = snapshot.result
    scope = "in this six-task Tovaki integration sample"
    assert result["scope_language"] == scope
    panel = result["panels"][0]
    # Independently, from stats.scorecards on the same scores.
    rule = scorecards.ScoringRule.from_definition(made.round.protocol)
    expected = scorecards.publish_totals(
        pd.DataFrame(
            {
                "system": frame["system"],
                "reviewer": frame["juror"],
                "dimension": frame["dimension"],
                "score": frame["score"].astype(str),
                "task": frame["task_lane"],
            }
        ),
        rule,
    )
    assert panel["statement"] == expected.statement and scope in panel["statement"]
    assert [row["total"] for row in panel["totals"]] == [str(v) for v in expected.totals]
    assert Fraction(panel["close_result"]["difference"]) == expected.close.difference
    assert panel["close_result"]["distinguishable"] is (gap == "clear")
    if gap == "close":
        assert "not distinguishable" in panel["statement"]
    flagged = {(d["system"], d["dimension"]) for d in panel["disagreements"]}
    assert flagged == {(made.entries[2].label, made.round.protocol.quality_dimensions[1])}


def test_tovaki_page_shows_the_scope_and_the_disclosure_schedule(results_round, monkeypatch):
    made = results_round(protocol="tovaki-2026-r1", duration_class="clip_6s")
    frame = _tovaki_scores(made, reviewers=3, totals_gap="close")
    monkeypatch.setattr(jury_selectors, "scorecards_frame", lambda r: frame)
    services.round_lock(round_=to_judging(made.round), actor="staff")
    page = Client().get(f"/results/{made.round.slug}/").content.decode()
    assert "in this six-task Tovaki integration sample" in page
    assert "not distinguishable" in page
    assert "Disclosure schedule of the protocol" in page
    assert "withheld_until_scores_are_locked" in page and "anonymous_raw_reviewer_scores" in page
    assert "never decide rank" in page
    # Tovaki names no operator relationship: the page says nothing is recorded.
    assert "No sponsor, affiliate relationship, credit grant or operator relationship" in page


def test_a_jury_round_without_judgments_reads_the_real_jury_frames(results_round):
    made = results_round(entries=2, packages=1, duration_class="minute_5")
    outcome = services.results_ensure(round_=made.round)
    assert outcome.unavailable == {}
    statuses = {kind: s.result["status"] for kind, s in outcome.snapshots.items()}
    assert statuses == {
        "jury_dimensions": "no_data",
        "holistic_choice": "no_data",
        "segment": "no_data",
        "reliability": "ok",
    }
