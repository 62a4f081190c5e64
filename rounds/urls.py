from django.urls import include, path
from rest_framework.routers import DefaultRouter

from rounds import api

router = DefaultRouter()
router.register("protocols", api.ProtocolVersionViewSet, basename="protocol")
router.register("systems", api.SystemViewSet, basename="system")
router.register("system-versions", api.SystemVersionViewSet, basename="system-version")
router.register("rounds", api.RoundViewSet, basename="round")
router.register("runs", api.RunViewSet, basename="run")

urlpatterns = [
    path("runs/<uuid:public_id>/manifest.json", api.run_manifest, name="run-manifest"),
    path("proxies/<path:storage_name>", api.public_proxy, name="media-proxy"),
    path("", include(router.urls)),
]
