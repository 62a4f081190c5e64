from django.apps import AppConfig


class JuriesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "juries"
