"""Voting pages (/vote/...) and the deidentified ballot export (/api/v1/rounds/<slug>/...)."""

from django.urls import path

from voting import views

app_name = "voting"

urlpatterns = [
    path("vote/", views.start, name="start"),
    path("vote/a/<str:token>/", views.assignment_page, name="assignment"),
    path("vote/a/<str:token>/heartbeat", views.heartbeat, name="heartbeat"),
    path("vote/a/<str:token>/ballot", views.ballot, name="ballot"),
    path("vote/a/<str:token>/thanks", views.thanks, name="thanks"),
    path("vote/m/<str:token>/<int:film>", views.media, name="media"),
    path(
        "api/v1/rounds/<slug:slug>/ballots.<str:fmt>",
        views.ballots_export,
        name="ballots-export",
    ),
]
