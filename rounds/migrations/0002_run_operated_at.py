import django.db.models
from django.db import migrations

import rounds.models


class Migration(migrations.Migration):
    dependencies = [("rounds", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="operated_at",
            field=django.db.models.DateTimeField(
                blank=True,
                help_text="Last sign of life from the worker operating the run.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="entry",
            name="identity_nonce",
            field=django.db.models.CharField(
                default=rounds.models._new_nonce,
                editable=False,
                help_text="Private until the reveal: binds the committed identity hash to the identity.",
                max_length=64,
            ),
        ),
    ]
