from django.apps import AppConfig
from django.db.models.signals import post_migrate


class VotingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "voting"

    def ready(self) -> None:
        from duel import db
        from voting import triggers
        from voting.models import Battle

        # Nothing that was committed is ever edited (DESIGN.md): the assignment (with its side
        # randomization), every heartbeat, every ballot and every later exclusion are only ever
        # inserted; a battle's pair and measured durations are frozen from creation.
        for table in (
            "voting_assignment",
            "voting_heartbeat",
            "voting_ballot",
            "voting_ballotexclusion",
        ):
            db.register_append_only(table)
        db.register_frozen_columns("voting_battle", "created_at", Battle.FROZEN_FIELDS)
        post_migrate.connect(
            db.install_triggers_after_migrate, dispatch_uid="duel-install-triggers"
        )
        post_migrate.connect(
            triggers.install_after_migrate, dispatch_uid="voting-synthetic-demo-trigger"
        )
