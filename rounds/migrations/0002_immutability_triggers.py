"""Database-enforced immutability for committed round records.

Committed rounds, packages, frozen protocol versions, started runs and ended attempts cannot
change; manifests, human actions, budget approvals and disclosures are append-only.
"""

from django.db import migrations

from duel.db import append_only_sql, frozen_columns_sql, run_sql_per_vendor

ROUND_FROZEN = [
    "protocol_version_id",
    "result_type",
    "benchmark_class",
    "interaction_class",
    "prompt_track",
    "duration_class",
    "aspect_ratio",
    "source_asset_policy",
    "currency",
    "budget_per_system",
    "cost_ceiling",
    "credit_limit_per_system",
    "deadline",
    "retry_limit",
    "human_action_cap",
    "engine_controls",
    "detection_thresholds",
    "voting_settings",
    "controls_sha256",
    "is_demo",
    "season_id",
]
PACKAGE_FROZEN = [
    "round_id",
    "prompt_key",
    "task_lane",
    "variant_of_id",
    "content",
    "checklist",
    "sha256",
    "checklist_sha256",
]
PROTOCOL_FROZEN = ["key", "name", "version", "definition", "sha256"]
RUN_FROZEN = [
    "entry_id",
    "package_id",
    "recorded_system",
    "recorded_settings",
    "reserved_budget",
    "clock_started_at",
    "protocol_key",
]
ATTEMPT_FROZEN = [
    "run_id",
    "number",
    "state",
    "provider_request_id",
    "failure_code",
    "retry_reason",
    "cost",
    "local_compute",
    "output_id",
    "output_sha256",
    "arrived_at",
]


class Migration(migrations.Migration):
    dependencies = [("rounds", "0001_initial")]

    operations = [
        run_sql_per_vendor(
            frozen_columns_sql("rounds_protocolversion", "frozen_at", PROTOCOL_FROZEN)
        ),
        run_sql_per_vendor(frozen_columns_sql("rounds_round", "committed_at", ROUND_FROZEN)),
        run_sql_per_vendor(
            frozen_columns_sql("rounds_inputpackage", "committed_at", PACKAGE_FROZEN)
        ),
        run_sql_per_vendor(frozen_columns_sql("rounds_run", "started_at", RUN_FROZEN)),
        run_sql_per_vendor(frozen_columns_sql("rounds_attempt", "ended_at", ATTEMPT_FROZEN)),
        run_sql_per_vendor(append_only_sql("rounds_runmanifest")),
        run_sql_per_vendor(append_only_sql("rounds_humanaction")),
        run_sql_per_vendor(append_only_sql("rounds_budgetapproval")),
        run_sql_per_vendor(append_only_sql("rounds_disclosure")),
    ]
