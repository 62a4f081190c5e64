from django.db import migrations

from duel.db import append_only_sql, run_sql_per_vendor


class Migration(migrations.Migration):
    dependencies = [("rounds", "0003_engine_gateway")]

    operations = [run_sql_per_vendor(append_only_sql("rounds_gatewaylogrecord"))]
