"""Results pages and downloads (included at the site root by ``duel/urls.py``)."""

from django.urls import path

from stats import views

app_name = "stats"

urlpatterns = [
    path("results/", views.results_index, name="index"),
    path("results/<slug:slug>/", views.round_results, name="round"),
    path("results/<slug:slug>.json", views.round_results_json, name="round-json"),
    path("results/<slug:slug>.csv", views.round_results_csv, name="round-csv"),
    path(
        "results/<slug:slug>/inputs/<int:snapshot_id>.json",
        views.snapshot_inputs_json,
        name="inputs-json",
    ),
    path(
        "results/<slug:slug>/inputs/<int:snapshot_id>/<slug:table>.csv",
        views.snapshot_inputs_csv,
        name="inputs-csv",
    ),
]
