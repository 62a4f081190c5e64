from django.apps import AppConfig
from django.db.models.signals import post_migrate


class StatsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "stats"

    def ready(self) -> None:
        from duel import db

        # A computed result is never edited: a new calculation is a new snapshot (DESIGN.md,
        # "Nothing that was committed is ever edited").
        db.register_append_only("stats_resultsnapshot")
        post_migrate.connect(
            db.install_triggers_after_migrate, dispatch_uid="duel-install-triggers"
        )
