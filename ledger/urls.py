"""Routes of the transparency log, included at ``api/v1/log/`` by ``duel/urls.py``."""

from django.urls import path

from ledger import views

app_name = "ledger"

urlpatterns = [
    path("checkpoint", views.CheckpointView.as_view(), name="checkpoint"),
    path("entries", views.EntriesView.as_view(), name="entries"),
    path("proof/inclusion", views.InclusionProofView.as_view(), name="inclusion-proof"),
    path("proof/consistency", views.ConsistencyProofView.as_view(), name="consistency-proof"),
    path("key", views.KeyView.as_view(), name="key"),
    path("records/<str:kind>", views.RecordsView.as_view(), name="records"),
]
