from django.db import migrations

from duel.db import frozen_columns_sql, run_sql_per_vendor


class Migration(migrations.Migration):
    dependencies = [("rounds", "0005_run_output_facts")]

    operations = [
        run_sql_per_vendor(
            frozen_columns_sql(
                "rounds_entry",
                "committed_at",
                ["round_id", "system_version_id", "label", "path", "provider_config"],
            )
        )
    ]
