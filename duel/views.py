"""Site-wide pages: the front page and the health check."""

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


def home(request: HttpRequest) -> HttpResponse:
    """Front page: what Duel is and where to go."""
    return render(request, "home.html")


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness plus a database round trip, for the load balancer and compose health checks."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"ok": True, "database": connection.vendor})
