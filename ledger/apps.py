from django.apps import AppConfig
from django.db.models.signals import post_migrate

# Tables of the transparency log that only ever receive INSERTs (protocol "Transparency log":
# a correction adds a superseding record, it never overwrites).
APPEND_ONLY_TABLES = ("ledger_logentry", "ledger_lognode", "ledger_checkpoint")


class LedgerConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "ledger"
    verbose_name = "Transparency log"

    def ready(self) -> None:
        from duel import db

        # Migration 0002 creates the triggers; registering them too re-installs them after
        # every migrate, since SQLite drops a table's triggers when a migration rebuilds it.
        for table in APPEND_ONLY_TABLES:
            db.register_append_only(table)
        post_migrate.connect(
            db.install_triggers_after_migrate, dispatch_uid="duel-install-triggers"
        )
