"""Database-enforced immutability: triggers for append-only tables and frozen columns.

Rules that must hold go into the database, not only the ORM (STYLE.md). These builders
return SQL for PostgreSQL and SQLite, used from migrations through :func:`run_sql_per_vendor`.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import migrations


def append_only_sql(table: str) -> dict[str, tuple[list[str], list[str]]]:
    """Triggers refusing every UPDATE and DELETE on ``table``: (forward, reverse) per vendor."""
    fn = f"{table}_append_only"
    pg = (
        f"""
        CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger AS $$
        BEGIN
            RAISE EXCEPTION '% on {table} refused: the table is append-only', TG_OP
                USING ERRCODE = 'integrity_constraint_violation';
        END; $$ LANGUAGE plpgsql;
        CREATE TRIGGER {fn}_trg BEFORE UPDATE OR DELETE ON {table}
            FOR EACH ROW EXECUTE FUNCTION {fn}();
        """,
        f"DROP TRIGGER IF EXISTS {fn}_trg ON {table}; DROP FUNCTION IF EXISTS {fn}();",
    )
    sqlite = (
        [
            f"CREATE TRIGGER {fn}_upd BEFORE UPDATE ON {table} BEGIN SELECT RAISE(ABORT, "
            f"'UPDATE on {table} refused: the table is append-only'); END;",
            f"CREATE TRIGGER {fn}_del BEFORE DELETE ON {table} BEGIN SELECT RAISE(ABORT, "
            f"'DELETE on {table} refused: the table is append-only'); END;",
        ],
        [f"DROP TRIGGER IF EXISTS {fn}_upd;", f"DROP TRIGGER IF EXISTS {fn}_del;"],
    )
    return {"postgresql": ([pg[0]], [pg[1]]), "sqlite": sqlite}


def frozen_columns_sql(
    table: str, guard: str, columns: Sequence[str], *, forbid_delete: bool = True
) -> dict[str, tuple[list[str], list[str]]]:
    """Triggers refusing changes to ``columns`` (and DELETE) once ``guard`` IS NOT NULL.

    ``guard`` is the column that records the commitment (``committed_at``, ``started_at``):
    before it is set the row is a draft and may change; after it, the listed columns are
    frozen for good. Setting the guard itself is allowed once.
    """
    fn = f"{table}_frozen"
    watched = [*columns, guard]
    pg_changed = " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in watched)
    sqlite_changed = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in watched)
    pg_delete = (
        f"""
        IF TG_OP = 'DELETE' THEN
            IF OLD.{guard} IS NOT NULL THEN
                RAISE EXCEPTION 'DELETE on {table} refused: the row is committed'
                    USING ERRCODE = 'integrity_constraint_violation';
            END IF;
            RETURN OLD;
        END IF;"""
        if forbid_delete
        else "IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;"
    )
    pg = (
        f"""
        CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger AS $$
        BEGIN
            {pg_delete}
            IF OLD.{guard} IS NOT NULL AND ({pg_changed}) THEN
                RAISE EXCEPTION 'UPDATE on {table} refused: committed fields cannot change'
                    USING ERRCODE = 'integrity_constraint_violation';
            END IF;
            RETURN NEW;
        END; $$ LANGUAGE plpgsql;
        CREATE TRIGGER {fn}_trg BEFORE UPDATE OR DELETE ON {table}
            FOR EACH ROW EXECUTE FUNCTION {fn}();
        """,
        f"DROP TRIGGER IF EXISTS {fn}_trg ON {table}; DROP FUNCTION IF EXISTS {fn}();",
    )
    sqlite_forward = [
        f"CREATE TRIGGER {fn}_upd BEFORE UPDATE ON {table} "
        f"WHEN OLD.{guard} IS NOT NULL AND ({sqlite_changed}) BEGIN SELECT RAISE(ABORT, "
        f"'UPDATE on {table} refused: committed fields cannot change'); END;"
    ]
    if forbid_delete:
        sqlite_forward.append(
            f"CREATE TRIGGER {fn}_del BEFORE DELETE ON {table} WHEN OLD.{guard} IS NOT NULL "
            f"BEGIN SELECT RAISE(ABORT, 'DELETE on {table} refused: the row is committed'); END;"
        )
    sqlite = (
        sqlite_forward,
        [f"DROP TRIGGER IF EXISTS {fn}_upd;", f"DROP TRIGGER IF EXISTS {fn}_del;"],
    )
    return {"postgresql": ([pg[0]], [pg[1]]), "sqlite": sqlite}


_REGISTRY: dict[str, dict[str, tuple[list[str], list[str]]]] = {}


def register_append_only(table: str) -> None:
    """Declare ``table`` append-only; :func:`install_triggers` creates its triggers."""
    _REGISTRY[f"{table}:append_only"] = append_only_sql(table)


def register_frozen_columns(
    table: str, guard: str, columns: Sequence[str], *, forbid_delete: bool = True
) -> None:
    """Declare ``columns`` of ``table`` frozen once ``guard`` is set."""
    _REGISTRY[f"{table}:frozen"] = frozen_columns_sql(
        table, guard, columns, forbid_delete=forbid_delete
    )


def install_triggers(using: str = "default", **_: object) -> None:
    """(Re)create every registered trigger: idempotent, run after every ``migrate``.

    Triggers are installed after migrations rather than inside them because SQLite rebuilds a
    table (dropping its triggers) whenever a migration alters it; re-installing after each
    migrate keeps the database's refusal in force on both vendors.
    """
    from django.db import connections

    connection = connections[using]
    vendor = connection.vendor
    existing = set(connection.introspection.table_names())
    with connection.cursor() as cursor:
        for key, sql in _REGISTRY.items():
            if key.split(":")[0] not in existing:
                continue  # not migrated yet; the migrate that creates it installs it
            if vendor not in sql:
                raise NotImplementedError(f"no trigger SQL for database vendor {vendor!r}")
            forward, reverse = sql[vendor]
            for statement in [*reverse, *forward]:
                cursor.execute(statement)


def run_sql_per_vendor(sql: dict[str, tuple[list[str], list[str]]]) -> migrations.RunPython:
    """A migration operation that runs the vendor's statements (forward and reverse)."""

    def _run(index: int):
        def apply(apps, schema_editor):
            vendor = schema_editor.connection.vendor
            if vendor not in sql:
                raise NotImplementedError(f"no trigger SQL for database vendor {vendor!r}")
            for statement in sql[vendor][index]:
                schema_editor.execute(statement, params=None)

        return apply

    return migrations.RunPython(_run(0), _run(1))


def install_triggers_after_migrate(sender, using: str = "default", **kwargs) -> None:
    """post_migrate receiver: runs once per migrate (for the last app's signal is enough,
    but re-running is idempotent and cheap)."""
    install_triggers(using=using)
