"""A stored file's identity never changes: UPDATEs of its checksum, name, size or kind are
refused by the database (issue 4: "the SHA-256 of the original is taken as it arrives").
"""

from django.db import migrations

from duel.db import frozen_columns_sql, run_sql_per_vendor


class Migration(migrations.Migration):
    dependencies = [("media_pipeline", "0002_analysis_proxy_segments_jobs")]

    operations = [
        run_sql_per_vendor(
            frozen_columns_sql(
                "media_pipeline_mediafile",
                "created_at",
                ["sha256", "storage_name", "size_bytes", "kind"],
                forbid_delete=False,
            )
        ),
    ]
