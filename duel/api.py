"""API plumbing shared by every app: errors as clear 400s, staff-only writes."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def exception_handler(exc, context):
    """Rule violations from services become 400 answers with their messages, never a 500."""
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        return Response(detail, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, IntegrityError):
        return Response(
            {"detail": [f"refused by the database: {str(exc).splitlines()[0]}"]},
            status=status.HTTP_409_CONFLICT,
        )
    return drf_exception_handler(exc, context)
