"""Concurrent appenders on the real PostgreSQL get a gap-free sequence with no duplicate index."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection, connections, transaction

from ledger import keys, merkle, selectors, services
from ledger.models import EntryKind, LogEntry

pytestmark = [pytest.mark.services]

REPO = Path(__file__).resolve().parents[2]

APPENDER = """
import os, sys
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "duel.settings")
django.setup()
from django.db import transaction
from ledger.services import entry_append
worker, count = int(sys.argv[1]), int(sys.argv[2])
for i in range(count):
    with transaction.atomic():
        entry_append(kind="attempt", subject=f"proc:{worker}", payload={"i": i})
"""


def check_log_is_whole(expected: int) -> None:
    indexes = list(LogEntry.objects.order_by("index").values_list("index", flat=True))
    assert indexes == list(range(expected))
    data = [
        bytes(b) for b in LogEntry.objects.order_by("index").values_list("entry_bytes", flat=True)
    ]
    assert selectors.log_root() == {
        "tree_size": expected,
        "root_hash": merkle.root_hash(data).hex(),
    }
    public = keys.signing_key().public_key()
    for entry in LogEntry.objects.order_by("index"):
        public.verify(bytes(entry.signature), bytes(entry.entry_bytes))


def test_threads_appending_and_rolling_back_leave_no_gap(transactional_db, require_postgres):
    writers, per_writer = 4, 15
    errors: list[BaseException] = []
    barrier = threading.Barrier(writers)

    def work(worker: int) -> None:
        try:
            barrier.wait()
            for i in range(per_writer):
                with transaction.atomic():
                    services.entry_append(
                        kind=EntryKind.ATTEMPT, subject=f"thread:{worker}", payload={"i": i}
                    )
                # Every third change fails after appending: its entry must vanish.
                if i % 3 == 0:
                    try:
                        with transaction.atomic():
                            services.entry_append(
                                kind=EntryKind.ATTEMPT, subject="doomed", payload={"i": i}
                            )
                            raise RuntimeError("rolled back")
                    except RuntimeError:
                        pass
        except BaseException as exc:  # reported to the main thread below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    check_log_is_whole(writers * per_writer)
    assert not LogEntry.objects.filter(subject="doomed").exists()
    for worker in range(writers):
        subjects = LogEntry.objects.filter(subject=f"thread:{worker}")
        assert [e.payload["i"] for e in subjects.order_by("index")] == list(range(per_writer))


def test_processes_appending_concurrently_get_unique_consecutive_indexes(
    transactional_db, require_postgres
):
    keys.signing_key()  # create the key file every process will share
    db = connection.settings_dict
    env = dict(os.environ)
    env.update(
        DATABASE_URL=(
            f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:"
            f"{db['PORT'] or 5432}/{db['NAME']}"
        ),
        DUEL_LEDGER_KEY_FILE=str(settings.DUEL_LEDGER_KEY_FILE),
        DUEL_LEDGER_ORIGIN=keys.origin(),
    )
    env.pop("DUEL_LEDGER_SIGNING_KEY", None)
    processes, per_process = 4, 20
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(p), str(per_process)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for p in range(processes)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err.decode()
    check_log_is_whole(processes * per_process)
    for p in range(processes):
        assert LogEntry.objects.filter(subject=f"proc:{p}").count() == per_process
