from django.apps import AppConfig


class JuriesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "juries"
    verbose_name = "Juries"

    def ready(self) -> None:
        from duel import db
        from juries.models import AttentionQuestion, JuryPlan, Scorecard, Viewing

        # Protocol "Quality dimensions": anchors defined before screening; Tovaki controls:
        # scorecards hash-locked before reveal. Once the guard is set, the database refuses
        # any change to these columns and any delete.
        db.register_frozen_columns("juries_scorecard", "locked_at", Scorecard.FROZEN_FIELDS)
        db.register_frozen_columns("juries_juryplan", "frozen_at", JuryPlan.FROZEN_FIELDS)
        db.register_frozen_columns(
            "juries_attentionquestion", "frozen_at", AttentionQuestion.FROZEN_FIELDS
        )
        # The assignment of a viewing (who sees which film, in which session and position) is
        # logged as the order schedule; only its playback proof may change afterwards.
        db.register_frozen_columns("juries_viewing", "assigned_at", Viewing.FROZEN_FIELDS)
        # Records that are only ever created.
        for table in (
            "juries_juryfilm",
            "juries_screeningsession",
            "juries_playbackbeat",
            "juries_attentionanswer",
            "juries_segmentwindow",
            "juries_segmentvote",
        ):
            db.register_append_only(table)
