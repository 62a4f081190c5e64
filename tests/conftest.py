"""Shared fixtures: real services, a real Celery worker, and helpers to require them.

With ``DUEL_REQUIRE_SERVICES=1`` (CI), a test that needs PostgreSQL, Redis or a worker fails
when the service is missing instead of skipping.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

REPO = Path(__file__).resolve().parent.parent


def _missing(what: str) -> None:
    if settings.DUEL_REQUIRE_SERVICES:
        pytest.fail(f"{what} is required (DUEL_REQUIRE_SERVICES=1) but not available")
    pytest.skip(f"{what} not configured")


@pytest.fixture
def require_postgres(db):
    """The test runs on the real PostgreSQL (DATABASE_URL)."""
    if connection.vendor != "postgresql":
        _missing("PostgreSQL (set DATABASE_URL)")


@pytest.fixture
def require_redis():
    """A live Redis at REDIS_URL; returns a client."""
    if not settings.REDIS_URL:
        _missing("Redis (set REDIS_URL)")
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        client.ping()
    except redis.RedisError as exc:  # pragma: no cover - depends on the machine
        pytest.fail(f"Redis at {settings.REDIS_URL} does not answer: {exc}")
    return client


class WorkerProcess:
    """A real ``celery worker`` subprocess bound to the test database and a private queue."""

    def __init__(self, queue: str, env: dict[str, str], log_path: Path) -> None:
        self.queue = queue
        self.env = env
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "duel",
                "worker",
                "--pool=prefork",
                "--concurrency=1",
                "-Q",
                self.queue,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-l",
                "INFO",
            ],
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited early:\n{self.log()}")
            if b"ready." in self.log_path.read_bytes():
                return
            time.sleep(0.2)
        raise RuntimeError(f"celery worker did not become ready:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the whole worker process group, as a crashed machine would."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def celery_worker_factory(transactional_db, require_postgres, require_redis, tmp_path, settings):
    """Start real Celery workers against the test database; tasks are routed to their queue.

    The test must use ``transactional_db`` semantics (it does, through this fixture) so the
    worker sees committed rows.
    """
    from duel.celery import app

    db = connection.settings_dict
    database_url = (
        f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
        f"/{db['NAME']}"
    )
    queue = f"duel-test-{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        REDIS_URL=settings.REDIS_URL,
        DUEL_CELERY_QUEUE=queue,
        DUEL_VAR_DIR=str(settings.VAR_DIR),
        DUEL_MEDIA_ROOT=str(settings.MEDIA_ROOT),
        DUEL_WORK_DIR=str(settings.DUEL_WORK_DIR),
        DUEL_LEDGER_KEY_FILE=str(settings.DUEL_LEDGER_KEY_FILE),
        PYTHONUNBUFFERED="1",
        DUEL_RUN_POLL_INTERVAL_S="0.2",
    )
    previous = (app.conf.task_always_eager, app.conf.task_default_queue)
    app.conf.task_always_eager = False
    app.conf.task_default_queue = queue
    settings.CELERY_TASK_ALWAYS_EAGER = False
    workers: list[WorkerProcess] = []

    def start() -> WorkerProcess:
        worker = WorkerProcess(queue, env, tmp_path / f"worker-{len(workers)}.log")
        worker.start()
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.stop()
    app.conf.task_always_eager, app.conf.task_default_queue = previous


@pytest.fixture(autouse=True)
def _isolated_var(settings, tmp_path_factory):
    """Each test session writes media, keys and work files under a temporary var/."""
    base = tmp_path_factory.getbasetemp() / "var"
    settings.VAR_DIR = base
    settings.MEDIA_ROOT = base / "media"
    settings.DUEL_WORK_DIR = base / "work"
    settings.DUEL_LEDGER_KEY_FILE = base / "keys" / "ledger-ed25519.key"
    storages = dict(settings.STORAGES)
    if storages["default"]["BACKEND"].endswith("FileSystemStorage"):
        storages["default"] = {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": base / "media", "base_url": "/media/"},
        }
        settings.STORAGES = storages


@pytest.fixture(autouse=True)
def _sqlite_flush_past_append_only_triggers(request):
    """SQLite empties tables with DELETE after a transactional test, which the append-only
    triggers refuse: drop them first (the flush's post_migrate signal reinstalls them).
    PostgreSQL truncates, which row triggers do not see."""
    if not ({"transactional_db", "live_server"} & set(request.fixturenames)):
        yield
        return
    request.getfixturevalue("transactional_db")
    yield
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            for (name,) in cursor.fetchall():
                cursor.execute(f'DROP TRIGGER IF EXISTS "{name}"')


@pytest.fixture(autouse=True, scope="session")
def _session_task_queue():
    """Tasks a test queues without a worker go to this session's own queue, removed at the
    end, so the suite leaves nothing on the shared broker for a real worker to pick up."""
    from duel.celery import app

    if app.conf.task_always_eager:
        yield
        return
    queue = f"duel-test-session-{os.getpid()}"
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    yield
    app.conf.task_default_queue = previous
    import redis

    try:
        redis.Redis.from_url(settings.REDIS_URL).delete(queue)
    except redis.RedisError:  # pragma: no cover - the broker went away; nothing to clean
        pass
