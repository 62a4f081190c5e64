"""API permissions shared by every app."""

from rest_framework import permissions


class StaffWritePublicRead(permissions.BasePermission):
    """Anyone may read; only staff may write."""

    def has_permission(self, request, view):
        if request.method in permissions.SAFE_METHODS:
            return True
        return bool(request.user and request.user.is_staff)
