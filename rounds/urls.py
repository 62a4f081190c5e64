from django.urls import include, path
from rest_framework.routers import DefaultRouter

from rounds import api, engine_api

router = DefaultRouter()
router.register("protocols", api.ProtocolVersionViewSet, basename="protocol")
router.register("systems", api.SystemViewSet, basename="system")
router.register("system-versions", api.SystemVersionViewSet, basename="system-version")
router.register("rounds", api.RoundViewSet, basename="round")
router.register("runs", api.RunViewSet, basename="run")

urlpatterns = [
    path("runs/<uuid:public_id>/manifest.json", api.run_manifest, name="run-manifest"),
    path("proxies/<path:storage_name>", api.public_proxy, name="media-proxy"),
    path("engine/requests", engine_api.create_request, name="engine-request-create"),
    path("engine/requests/<uuid:public_id>", engine_api.request_status, name="engine-request"),
    path(
        "engine/requests/<uuid:public_id>/output",
        engine_api.request_output,
        name="engine-request-output",
    ),
    path("engine/usage", engine_api.usage, name="engine-usage"),
    path("", include(router.urls)),
]
