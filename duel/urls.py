from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from duel import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/v1/log/", include("ledger.urls")),
    path("api/v1/", include("rounds.urls")),
    path("", include("voting.urls")),
    path("", include("juries.urls")),
    path("", include("stats.urls")),
    path("", include("media_pipeline.urls")),
]
