from django.db import migrations, models

import rounds.models


class Migration(migrations.Migration):
    dependencies = [("rounds", "0002_run_operated_at")]

    operations = [
        migrations.AlterField(
            model_name="round",
            name="detection_thresholds",
            field=models.JSONField(
                blank=True,
                default=rounds.models.default_detection_controls,
                help_text="Frozen at commit with the ffmpeg version that applies them.",
            ),
        ),
    ]
