"""Append-only at the database: UPDATE and DELETE on the log tables are refused.

Protocol "Transparency log": a correction adds a superseding record and never overwrites.
Triggers for PostgreSQL and SQLite come from ``duel.db.append_only_sql``. Also creates the
single ``LogHead`` row appenders lock.
"""

from django.db import migrations

from duel.db import append_only_sql, run_sql_per_vendor

LOG_TABLES = ("ledger_logentry", "ledger_lognode", "ledger_checkpoint")

EMPTY_ROOT = bytes.fromhex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")


def create_head(apps, schema_editor):
    LogHead = apps.get_model("ledger", "LogHead")
    LogHead.objects.get_or_create(
        id=1, defaults={"tree_size": 0, "root_hash": EMPTY_ROOT, "frontier": b""}
    )


class Migration(migrations.Migration):
    dependencies = [("ledger", "0001_initial")]

    operations = [
        *(run_sql_per_vendor(append_only_sql(table)) for table in LOG_TABLES),
        migrations.RunPython(create_head, migrations.RunPython.noop),
    ]
