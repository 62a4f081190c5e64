"""Juror pages under /jury/ (included at the site root by duel/urls.py)."""

from django.contrib.auth.views import LogoutView
from django.urls import path

from juries import segment_views, views

app_name = "juries"

urlpatterns = [
    path("jury/", views.home, name="home"),
    path("jury/login/", views.JurorLoginView.as_view(), name="login"),
    path("jury/logout/", LogoutView.as_view(next_page="/jury/login/"), name="logout"),
    path("jury/session/<uuid:session_id>/", views.session_page, name="session"),
    path("jury/viewing/<uuid:viewing_id>/start", views.viewing_start, name="viewing-start"),
    path("jury/viewing/<uuid:viewing_id>/beat", views.viewing_beat, name="viewing-beat"),
    path("jury/viewing/<uuid:viewing_id>/media", views.viewing_media, name="viewing-media"),
    path("jury/viewing/<uuid:viewing_id>/answers", views.viewing_answers, name="viewing-answers"),
    path(
        "jury/viewing/<uuid:viewing_id>/scorecard",
        views.viewing_scorecard,
        name="viewing-scorecard",
    ),
    path("jury/segments/<slug:slug>/", segment_views.segments_page, name="segments"),
    path(
        "jury/segments/pair/<str:token>/<int:slot>/media",
        segment_views.segment_media,
        name="segment-media",
    ),
    path(
        "jury/segments/pair/<str:token>/<int:slot>/beat",
        segment_views.segment_beat,
        name="segment-beat",
    ),
    path("jury/segments/pair/<str:token>/vote", segment_views.segment_vote, name="segment-vote"),
]
