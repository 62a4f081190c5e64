"""Reader pages and downloads of results: /results/, the leaderboard, JSON, CSV and inputs.

Thin: find the round, make sure its results are computed (``stats.services.results_ensure``),
read the results document (``stats.selectors.results_document``) and render it. Identities
appear only after the round's reveal; disclosures and the automated-critics statement appear on
every page and in every export (issues 8 and 9).
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe

from rounds.models import Round
from stats import plots, results, selectors, services


def _visible_round(slug: str) -> Round:
    round_ = Round.objects.select_related("protocol_version").filter(slug=slug).first()
    if round_ is None or not selectors.results_visible(round_):
        raise Http404("no published results for this round")
    return round_


def _document(round_: Round) -> dict[str, Any]:
    outcome = services.results_ensure(round_=round_)
    return selectors.results_document(round_, outcome.snapshots, unavailable=outcome.unavailable)


def results_index(request: HttpRequest) -> HttpResponse:
    """Rounds with published results, newest first, with their headline label."""
    rounds = list(selectors.public_result_rounds()[:200])
    headline = selectors.headline_snapshots(rounds)
    items = []
    for round_ in rounds:
        snapshot = headline.get(round_.pk)
        label = None
        if snapshot is not None:
            publication = snapshot.result.get("publication") or {}
            label = publication.get("text") or snapshot.result.get("title")
        items.append(
            {
                "round": round_,
                "interim": selectors.results_interim(round_),
                "label": label,
                "kind": snapshot.result_kind if snapshot else None,
            }
        )
    context = {
        "items": items,
        "disclosures": selectors.platform_disclosures(rounds),
        "critics": results.CRITICS_STATEMENT,
    }
    return render(request, "stats/results_index.html", context)


# ---------------------------------------------------------------------------------------------
# The leaderboard page


def _plot(rows: list[dict[str, Any]], title: str, key: str = "rating") -> str:
    # Safe: interval_plot_svg escapes every label and the title.
    return mark_safe(
        plots.interval_plot_svg(
            [
                plots.IntervalRow(
                    label=_shown(r),
                    estimate=r.get(key),
                    lower=r.get("lower"),
                    upper=r.get("upper"),
                )
                for r in rows
            ],
            title=title,
        )
    )


def _shown(row: dict[str, Any]) -> str:
    """A system as readers see it: the label, and the identity once revealed."""
    identity = row.get("identity")
    return f"{row['label']} - {identity}" if identity else str(row["label"])


def _matrix(block: dict[str, Any]) -> dict[str, Any] | None:
    matrix = block.get("win_matrix") or {}
    systems = matrix.get("systems") or []
    if not systems:
        return None
    rows = []
    for i, winner in enumerate(systems):
        cells = []
        for j in range(len(systems)):
            if i == j:
                cells.append(None)
            else:
                wins = matrix["wins"][i][j]
                games = wins + matrix["wins"][j][i]
                cells.append({"wins": wins, "games": games})
        rows.append({"label": winner, "cells": cells})
    return {"systems": systems, "rows": rows}


def _pairwise_view(block: dict[str, Any], title: str) -> dict[str, Any]:
    systems = block.get("systems") or []
    rated = [r for r in systems if r.get("rating") is not None]
    return {
        **block,
        "plot": _plot(systems, title) if rated else None,
        "matrix": _matrix(block),
    }


def _page_results(document: dict[str, Any]) -> list[dict[str, Any]]:
    sections = []
    for kind, block in document["results"].items():
        result = block.get("result")
        section: dict[str, Any] = {"kind": kind, "block": block, "result": result}
        if result is None:
            sections.append(section)
            continue
        if kind == results.FULL_FILM_VOTES:
            section["view"] = _pairwise_view(result, result["title"])
        elif kind in (results.SEGMENT, results.HOLISTIC_CHOICE):
            section["panels"] = [
                _pairwise_view(p, f"{result['title']}, {p['panel']} panel")
                for p in result.get("panels", [])
            ]
        elif kind == results.JURY_DIMENSIONS:
            panels = []
            for panel in result.get("panels", []):
                dims = [
                    {
                        **dim,
                        "plot": _plot(dim["systems"], f"{dim['name']} ({panel['panel']})", "mean"),
                    }
                    for dim in panel["dimensions"]
                ]
                panels.append({**panel, "dimensions": dims})
            section["panels"] = panels
        elif kind == results.RELIABILITY:
            section["reliability_rows"] = [
                {
                    **entry,
                    "states": [entry["by_final_state"].get(s, 0) for s in result["final_states"]],
                    "costs": [entry["cost"].get(name, "") for name in result["cost_fields"]],
                }
                for entry in result.get("entries", [])
            ]
        sections.append(section)
    return sections


def round_results(request: HttpRequest, slug: str) -> HttpResponse:
    """The leaderboard of one round: every result kind its protocol defines."""
    round_ = _visible_round(slug)
    document = _document(round_)
    verification = selectors.verify_reveal(round_) if round_.identities_revealed else None
    context = {
        "round": round_,
        "document": document,
        "sections": _page_results(document),
        "verification": verification,
    }
    return render(request, "stats/round_results.html", context)


# ---------------------------------------------------------------------------------------------
# Downloads


def round_results_json(request: HttpRequest, slug: str) -> JsonResponse:
    round_ = _visible_round(slug)
    response = JsonResponse(_document(round_), json_dumps_params={"indent": 2, "sort_keys": True})
    response["Content-Disposition"] = f'inline; filename="{round_.slug}-results.json"'
    return response


def round_results_csv(request: HttpRequest, slug: str) -> HttpResponse:
    round_ = _visible_round(slug)
    response = HttpResponse(
        selectors.results_csv(_document(round_)), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{round_.slug}-results.csv"'
    return response


def _snapshot(slug: str, snapshot_id: int):
    round_ = _visible_round(slug)
    snapshot = selectors.snapshot_of_round(round_, snapshot_id)
    if snapshot is None:
        raise Http404("no such result snapshot")
    return round_, snapshot


def snapshot_inputs_json(request: HttpRequest, slug: str, snapshot_id: int) -> HttpResponse:
    """The exact bytes the result was computed from; their SHA-256 is in the log."""
    round_, snapshot = _snapshot(slug, snapshot_id)
    response = HttpResponse(snapshot.inputs.encode("utf-8"), content_type="application/json")
    response["X-Content-SHA256"] = snapshot.inputs_sha256
    response["Content-Disposition"] = (
        f'attachment; filename="{round_.slug}-{snapshot.result_kind}-{snapshot.pk}-inputs.json"'
    )
    return response


def snapshot_inputs_csv(
    request: HttpRequest, slug: str, snapshot_id: int, table: str
) -> HttpResponse:
    """One table of a snapshot's inputs as CSV."""
    import json

    round_, snapshot = _snapshot(slug, snapshot_id)
    inputs = json.loads(snapshot.inputs)
    if table not in (inputs.get("tables") or {}):
        raise Http404("no such input table")
    response = HttpResponse(
        results.table_csv(inputs, table), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = (
        f'attachment; filename="{round_.slug}-{snapshot.result_kind}-{snapshot.pk}-{table}.csv"'
    )
    return response
