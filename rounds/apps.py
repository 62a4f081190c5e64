from django.apps import AppConfig
from django.db.models.signals import post_migrate


class RoundsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "rounds"

    def ready(self) -> None:
        from duel import db
        from rounds.models import Attempt, Entry, InputPackage, Round, Run

        # Committed rows: frozen columns once the guard column is set (protocol: Prompt
        # commitment, Run rules, Version changes).
        db.register_frozen_columns(
            "rounds_protocolversion",
            "frozen_at",
            ["key", "name", "version", "definition", "sha256"],
        )
        db.register_frozen_columns("rounds_round", "committed_at", Round.FROZEN_FIELDS)
        db.register_frozen_columns(
            "rounds_inputpackage", "committed_at", InputPackage.FROZEN_FIELDS
        )
        db.register_frozen_columns("rounds_entry", "committed_at", Entry.FROZEN_FIELDS)
        db.register_frozen_columns("rounds_run", "started_at", Run.FROZEN_FIELDS)
        db.register_frozen_columns("rounds_attempt", "ended_at", Attempt.FROZEN_FIELDS)
        # Append-only records: a correction is a new row.
        for table in (
            "rounds_runmanifest",
            "rounds_humanaction",
            "rounds_budgetapproval",
            "rounds_disclosure",
            "rounds_gatewaylogrecord",
            "rounds_watermarkpermission",
            "rounds_auditorattestation",
            "rounds_checklisttick",
            "rounds_criticreport",
        ):
            db.register_append_only(table)
        post_migrate.connect(
            db.install_triggers_after_migrate, dispatch_uid="duel-install-triggers"
        )
