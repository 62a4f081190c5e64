"""The Celery app. Workers: ``celery -A duel worker``."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "duel.settings")

app = Celery("duel")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
