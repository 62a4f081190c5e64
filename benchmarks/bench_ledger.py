"""Transparency log benchmarks on PostgreSQL (issue 3, "Benchmarks").

Measures, in a scratch database ``duel_bench_ledger`` that it creates and drops:

1. appends per second from four concurrent writer processes, each append its own transaction
   through ``ledger.services.entry_append`` (and one writer, for reference);
2. inclusion and consistency proof time at 1,000,000 entries from stored subtree hashes
   (goal: under 10 ms each), through the selectors and through the HTTP views;
3. full verification time of 1,000,000 entries (``ledger.audit.verify_database``: every
   signature, leaf hash, stored node and checkpoint).

The 1M-entry log is built directly with COPY: real canonical entries, real Ed25519 signatures,
the same leaf hashes and subtree nodes ``entry_append`` would store.

Usage: ``.venv/bin/python benchmarks/bench_ledger.py [--entries N] [--writers 4]``
(``BENCH_PG_URL`` overrides ``postgres://postgres@127.0.0.1:5432/``).
"""

from __future__ import annotations

import argparse
import base64
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SERVER_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/")
DB_NAME = "duel_bench_ledger"
BENCH_KEY = base64.b64encode(bytes(range(32))).decode()


def configure_environment() -> None:
    os.environ["DATABASE_URL"] = SERVER_URL.rstrip("/") + "/" + DB_NAME
    os.environ["DJANGO_SETTINGS_MODULE"] = "duel.settings"
    os.environ["DJANGO_DEBUG"] = "0"  # no query log in the measured processes
    os.environ["DUEL_LEDGER_SIGNING_KEY"] = BENCH_KEY
    os.environ.setdefault("DUEL_LEDGER_ORIGIN", "bench.duel.local/log")
    os.environ.setdefault("DUEL_VAR_DIR", tempfile.mkdtemp(prefix="duel-bench-ledger-"))


def admin_connection():
    import psycopg

    conn = psycopg.connect(SERVER_URL.rstrip("/") + "/postgres", autocommit=True)
    return conn


def create_database() -> None:
    with admin_connection() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")


def drop_database() -> None:
    with admin_connection() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")


def setup_django() -> None:
    configure_environment()
    import django

    django.setup()


def migrate_ledger_only() -> None:
    """Apply the ledger's migrations (they install its triggers) and nothing else.

    No post_migrate signal: other apps' receivers would expect their own tables.
    """
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes("ledger"))


# --- 1. concurrent appends ---------------------------------------------------------------------


def writer(worker: int, count: int, barrier) -> None:
    setup_django()
    from django.db import connection, transaction

    from ledger.services import entry_append

    connection.ensure_connection()
    barrier.wait()
    for i in range(count):
        with transaction.atomic():
            entry_append(
                kind="attempt",
                subject=f"bench:{worker}",
                payload={"attempt": i, "output_sha256": f"{i:064x}"},
            )


def measure_appends(writers: int, per_writer: int) -> float:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(writers + 1)
    procs = [ctx.Process(target=writer, args=(w, per_writer, barrier)) for w in range(writers)]
    for proc in procs:
        proc.start()
    barrier.wait()
    started = time.perf_counter()
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise RuntimeError(f"writer exited with {proc.exitcode}")
    elapsed = time.perf_counter() - started
    return writers * per_writer / elapsed


def check_gap_free(expected: int) -> None:
    from django.db.models import Count, Max, Min

    from ledger.models import LogEntry

    stats = LogEntry.objects.aggregate(n=Count("index"), lo=Min("index"), hi=Max("index"))
    assert stats == {"n": expected, "lo": 0, "hi": expected - 1}, stats


# --- 2. building a 1M-entry log ----------------------------------------------------------------


def build_log(entries: int) -> float:
    from django.db import connection

    from ledger import keys, merkle, note
    from ledger.models import LogHead
    from ledger.services import entry_bytes_for, format_timestamp

    key = keys.signing_key()
    key_id = note.key_id(keys.origin(), note.public_key_bytes(key))
    compact = merkle.CompactRange()
    base = datetime(2026, 1, 1, tzinfo=UTC)
    kinds = ["attempt", "output_hash", "manifest", "ballot", "segment_windows"]
    started = time.perf_counter()
    chunk = 50_000
    with connection.cursor() as cursor:
        raw = cursor.cursor
        for first in range(0, entries, chunk):
            # One COPY per chunk, then its nodes: a connection runs one COPY at a time.
            nodes: list[tuple[int, int, bytes]] = []
            with raw.copy(
                "COPY ledger_logentry (entry_index, kind, subject, timestamp, payload, "
                "supersedes_index, entry_bytes, leaf_hash, key_id, signature) FROM STDIN"
            ) as copy:
                for index in range(first, min(entries, first + chunk)):
                    moment = base + timedelta(microseconds=index * 1000)
                    kind = kinds[index % len(kinds)]
                    subject = f"run:{index // 50}"
                    payload = {"attempt": index % 50, "sha256": f"{index:064x}"}
                    data = entry_bytes_for(
                        index=index,
                        kind=kind,
                        subject=subject,
                        timestamp=format_timestamp(moment),
                        payload=payload,
                        supersedes=None,
                    )
                    leaf = merkle.leaf_hash(data)
                    copy.write_row(
                        (
                            index,
                            kind,
                            subject,
                            moment,
                            json.dumps(payload),
                            None,
                            data,
                            leaf,
                            key_id,
                            key.sign(data),
                        )
                    )
                    nodes.extend(compact.append(leaf))
            with raw.copy("COPY ledger_lognode (level, node_index, hash) FROM STDIN") as copy:
                for row in nodes:
                    copy.write_row(row)
    LogHead.objects.filter(pk=1).update(
        tree_size=entries,
        root_hash=compact.root(),
        frontier=b"".join(compact.frontier_hashes()),
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE ledger_logentry")
        cursor.execute("ANALYZE ledger_lognode")
    return time.perf_counter() - started


# --- 3. proofs ---------------------------------------------------------------------------------


def time_ms(fn, repeats: int) -> tuple[float, float, float]:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1], samples[-1]


def measure_proofs(size: int, repeats: int) -> dict[str, tuple[float, float, float]]:
    from django.test import Client

    from ledger import merkle, selectors

    rng = random.Random(6962)
    root = selectors.root_at(size)
    results = {}

    def inclusion() -> None:
        index = rng.randrange(size)
        proof = selectors.inclusion_proof(index, size)
        leaf = bytes(selectors.entry_at(index).leaf_hash)
        assert merkle.verify_inclusion(leaf, index, size, proof, root)

    def consistency() -> None:
        first = rng.randrange(1, size)
        proof = selectors.consistency_proof(first, size)
        assert merkle.verify_consistency(first, size, selectors.root_at(first), root, proof)

    results["inclusion proof (selector, incl. leaf fetch + verify)"] = time_ms(inclusion, repeats)
    results["consistency proof (selector, incl. old root + verify)"] = time_ms(consistency, repeats)
    results["inclusion proof, stored nodes only"] = time_ms(
        lambda: selectors.inclusion_proof(rng.randrange(size), size), repeats
    )
    results["consistency proof, stored nodes only"] = time_ms(
        lambda: selectors.consistency_proof(rng.randrange(1, size), size), repeats
    )
    client = Client()
    results["GET /proof/inclusion"] = time_ms(
        lambda: client.get(
            "/api/v1/log/proof/inclusion", {"index": rng.randrange(size), "tree_size": size}
        ),
        repeats,
    )
    results["GET /proof/consistency"] = time_ms(
        lambda: client.get(
            "/api/v1/log/proof/consistency", {"first": rng.randrange(1, size), "second": size}
        ),
        repeats,
    )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--entries", type=int, default=1_000_000, help="log size for proofs (0: appends only)"
    )
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--appends-per-writer", type=int, default=500)
    parser.add_argument("--proof-repeats", type=int, default=300)
    parser.add_argument(
        "--verify-jobs",
        type=int,
        nargs="+",
        default=[os.cpu_count() or 1],
        help="signature processes for the full verification (several values: one run each)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()

    configure_environment()
    create_database()
    try:
        setup_django()
        from django.db import connection

        migrate_ledger_only()
        print(
            f"PostgreSQL {connection.cursor().connection.info.server_version}, "
            f"{os.cpu_count()} CPUs"
        )

        rate_1 = measure_appends(1, args.appends_per_writer)
        check_gap_free(args.appends_per_writer)
        rate_n = measure_appends(args.writers, args.appends_per_writer)
        total = args.appends_per_writer * (1 + args.writers)
        check_gap_free(total)
        from ledger import audit

        report = audit.verify_database()
        assert report.ok, report.summary()
        print(f"appends/s, 1 writer process:  {rate_1:8.0f}")
        print(
            f"appends/s, {args.writers} writer processes: {rate_n:8.0f} "
            f"({args.writers * args.appends_per_writer} appends, gap-free, verified)"
        )

        if args.entries == 0:
            return 0
        from ledger import merkle
        from ledger.models import LogHead

        with connection.cursor() as cursor:
            cursor.execute(
                "TRUNCATE ledger_logentry, ledger_lognode, ledger_checkpoint, ledger_loghead"
            )
        LogHead.objects.create(id=1, tree_size=0, root_hash=merkle.EMPTY_ROOT)

        build_seconds = build_log(args.entries)
        print(f"built {args.entries:,} signed entries + nodes with COPY in {build_seconds:.1f} s")

        from ledger import services

        services.checkpoint_publish()
        for name, (median, p95, worst) in measure_proofs(args.entries, args.proof_repeats).items():
            print(f"{name:55s} median {median:6.2f} ms  p95 {p95:6.2f} ms  max {worst:6.2f} ms")

        for jobs in sorted(set(args.verify_jobs), reverse=True):
            started = time.perf_counter()
            report = audit.verify_database(jobs=jobs)
            seconds = time.perf_counter() - started
            assert report.ok, report.summary()
            print(
                f"full verification of {report.entries_checked:,} entries, {jobs} signature "
                f"process(es): {seconds:.1f} s ({report.entries_checked / seconds:,.0f} entries/s)"
            )
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database()
    return 0


if __name__ == "__main__":
    sys.exit(main())
