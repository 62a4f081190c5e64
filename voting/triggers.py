"""Database rules of the voting app that a CheckConstraint cannot state (they span tables).

Issue 8: "synthetic ballots are marked as such, exist only in rounds marked as demos, and can
never enter a real round." ``ballot_cast`` refuses them; this trigger makes the database refuse
them too, whatever writes the row. ``Round.is_demo`` is frozen once the round is committed
(``rounds/apps.py``), so the check at insert time holds for good.
"""

from __future__ import annotations

TABLE = "voting_ballot"
NAME = "voting_ballot_synthetic_demo"
MESSAGE = "synthetic ballots are allowed only in demo rounds"


def synthetic_only_in_demo_sql() -> dict[str, tuple[list[str], list[str]]]:
    """(forward, reverse) statements per vendor, in the shape ``duel.db`` uses."""
    pg_forward = f"""
        CREATE OR REPLACE FUNCTION {NAME}() RETURNS trigger AS $$
        BEGIN
            IF NEW.synthetic AND NOT COALESCE(
                (SELECT is_demo FROM rounds_round WHERE id = NEW.round_id), FALSE
            ) THEN
                RAISE EXCEPTION '{MESSAGE}' USING ERRCODE = 'check_violation';
            END IF;
            RETURN NEW;
        END; $$ LANGUAGE plpgsql;
        CREATE TRIGGER {NAME}_trg BEFORE INSERT ON {TABLE}
            FOR EACH ROW EXECUTE FUNCTION {NAME}();
    """
    pg_reverse = f"DROP TRIGGER IF EXISTS {NAME}_trg ON {TABLE}; DROP FUNCTION IF EXISTS {NAME}();"
    sqlite_forward = (
        f"CREATE TRIGGER {NAME}_ins BEFORE INSERT ON {TABLE} "
        f"WHEN NEW.synthetic AND NOT COALESCE("
        f"(SELECT is_demo FROM rounds_round WHERE id = NEW.round_id), 0) "
        f"BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;"
    )
    sqlite_reverse = f"DROP TRIGGER IF EXISTS {NAME}_ins;"
    return {
        "postgresql": ([pg_forward], [pg_reverse]),
        "sqlite": ([sqlite_forward], [sqlite_reverse]),
    }


def install(using: str = "default", **_: object) -> None:
    """(Re)create the trigger: idempotent, run after every ``migrate`` like ``duel.db``'s."""
    from django.db import connections

    connection = connections[using]
    sql = synthetic_only_in_demo_sql()
    if connection.vendor not in sql:
        raise NotImplementedError(f"no trigger SQL for database vendor {connection.vendor!r}")
    forward, reverse = sql[connection.vendor]
    with connection.cursor() as cursor:
        for statement in [*reverse, *forward]:
            cursor.execute(statement)


def install_after_migrate(sender, using: str = "default", **kwargs) -> None:
    """post_migrate receiver (the table exists once the voting app has migrated)."""
    if getattr(sender, "label", None) == "voting":
        install(using=using)
