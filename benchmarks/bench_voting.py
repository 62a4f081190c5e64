"""Voting load benchmark: gunicorn on PostgreSQL, a bounded load client on loopback (issue 6).

Creates a scratch database ``duel_bench_voting``, migrates it, seeds an open round with three
entries whose runs went through the real run services (real 3-second proxies), then starts
gunicorn (``duel.wsgi``, gthread workers) and drives it from a threaded HTTP client on
loopback, in three phases of the same run:

1. a trivial Django view on the same stack (``GET /healthz``: one ``SELECT 1``, JSON);
2. the heartbeat endpoint: signed heartbeats (HMAC, CSRF, the voter's signed cookie), each
   judged on the server clock and stored, for fresh assignments;
3. the ballot endpoint: signed ballots on assignments whose playback sessions the seed marked
   as watched (the seed writes the session summaries directly, so the benchmark does not wait
   for films to play), each locked, hashed and appended to the transparency log.

It prints throughput and p50/p99 latency per phase, ballots accepted per second, and each
endpoint's figures against the trivial view's as ratios. Bounded in count and in time per
phase. Rate limits are lifted (``bench_voting_settings``): every request comes from one
address. Uses Redis as the cache when ``REDIS_URL`` is set, as production does.

Usage: ``.venv/bin/python benchmarks/bench_voting.py [--voters 300] [--concurrency 8]``
(``BENCH_PG_URL`` overrides ``postgres://postgres@127.0.0.1:5432/``).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.client
import json
import os
import secrets
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SERVER_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/")
DB_NAME = "duel_bench_voting"
SETTINGS = "benchmarks.bench_voting_settings"
PHASE_TIME_LIMIT_S = 60.0


def configure_environment(var_dir: str) -> None:
    os.environ["DATABASE_URL"] = SERVER_URL.rstrip("/") + "/" + DB_NAME
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ["DJANGO_DEBUG"] = "0"  # no query log in the measured processes
    os.environ["DUEL_VAR_DIR"] = var_dir
    os.environ.setdefault("DUEL_LEDGER_ORIGIN", "bench.duel.local/log")
    os.environ["PYTHONPATH"] = str(REPO)


def admin_connection():
    import psycopg

    return psycopg.connect(SERVER_URL.rstrip("/") + "/postgres", autocommit=True)


def create_database() -> None:
    with admin_connection() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")


def drop_database() -> None:
    with admin_connection() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")


# --- seeding -------------------------------------------------------------------------------------


@dataclass
class Ticket:
    """What a page holds for one assignment: its token, key and the voter's cookies."""

    token: str
    key: str
    cookie: str
    csrf: str


def make_film(path: Path) -> Path:
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc=size=320x180:rate=12:duration=3",
            "-f",
            "lavfi",
            "-i",
            "sine=frequency=440:duration=3",
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-pix_fmt",
            "yuv420p",
            "-c:a",
            "aac",
            "-shortest",
            "-movflags",
            "+faststart",
            str(path),
        ],
        check=True,
    )
    return path


def seed(voters: int, var_dir: Path) -> tuple[list[Ticket], list[Ticket]]:
    """An open round with three finished runs; ``voters`` fresh assignments for heartbeats and
    ``voters`` watched ones for ballots."""
    import django

    django.setup()
    from django.core import signing
    from django.core.management import call_command
    from django.db import connection

    from tests import factories
    from voting import services
    from voting.models import PlaybackSession
    from voting.views import VOTER_COOKIE, VOTER_COOKIE_SALT

    call_command("migrate", verbosity=0, interactive=False)
    film = make_film(var_dir / "film.mp4")
    round_ = factories.open_round(
        entries=3, voting_settings={"max_voters_per_network": 10**9, "ballots_per_voter": 10}
    )
    for entry in round_.entries.all():
        factories.finished_run(entry, round_.packages.get(), original_path=film)
    services.battle_sync(round_=round_)
    signer = signing.get_cookie_signer(salt=VOTER_COOKIE + VOTER_COOKIE_SALT)
    network = services.network_hash_of("127.0.0.1")

    def tickets(count: int, watched: bool) -> list[Ticket]:
        made = []
        for _ in range(count):
            voter = services.voter_create(network_hash=network, user_agent="bench")
            assignment = services.assignment_next(voter=voter, round_=round_)
            if watched:
                for session in assignment.sessions.all():
                    whole = [[0.0, session.duration_s]]
                    PlaybackSession.objects.filter(pk=session.pk).update(
                        played=whole,
                        audible=whole,
                        watched_s=session.duration_s,
                        audible_s=session.duration_s,
                        ended=True,
                    )
            csrf = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))
            made.append(
                Ticket(
                    token=assignment.token,
                    key=assignment.hmac_key,
                    cookie=f"{VOTER_COOKIE}={signer.sign(str(voter.public_id))}; csrftoken={csrf}",
                    csrf=csrf,
                )
            )
        return made

    fresh, ready = tickets(voters, False), tickets(voters, True)
    connection.close()
    return fresh, ready


# --- the load client -----------------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class PhaseResult:
    name: str
    sent: int
    elapsed_s: float
    latencies_ms: list[float]
    statuses: dict[int, int]

    @property
    def throughput(self) -> float:
        return self.sent / self.elapsed_s if self.elapsed_s else 0.0

    def ok_per_s(self, status: int) -> float:
        return self.statuses.get(status, 0) / self.elapsed_s if self.elapsed_s else 0.0

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def signed(path: str, ticket: Ticket, document: dict) -> Request:
    body = json.dumps(document, separators=(",", ":")).encode()
    signature = hmac.new(bytes.fromhex(ticket.key), body, hashlib.sha256).hexdigest()
    return Request(
        "POST",
        path,
        body,
        {
            "Content-Type": "application/json",
            "Cookie": ticket.cookie,
            "X-CSRFToken": ticket.csrf,
            "X-Duel-Signature": signature,
        },
    )


def heartbeat_requests(ticket: Ticket, count: int) -> list[Request]:
    """A page's heartbeats: the play event, then 1 ms of film per heartbeat (always within the
    server clock's allowance, so every one is judged, stored and accepted)."""
    made = []
    for seq in range(1, count + 1):
        start, end = (seq - 2) * 0.001, (seq - 1) * 0.001
        made.append(
            signed(
                f"/vote/a/{ticket.token}/heartbeat",
                ticket,
                {
                    "token": ticket.token,
                    "film": 1,
                    "seq": seq,
                    "t": 1_700_000_000_000 + seq * 1000 + secrets.randbelow(20),
                    "ranges": [] if seq == 1 else [[round(start, 3), round(end, 3), 1]],
                    "muted": False,
                    "volume": 1.0,
                    "rate": 1.0,
                    "paused": False,
                    "ended": False,
                    "visible": True,
                },
            )
        )
    return made


def run_phase(name: str, port: int, per_thread: list[list[Request]]) -> PhaseResult:
    """Each thread sends its own list in order on a keep-alive connection; bounded in time."""
    latencies: list[list[float]] = [[] for _ in per_thread]
    statuses: list[dict[int, int]] = [{} for _ in per_thread]
    deadline = time.perf_counter() + PHASE_TIME_LIMIT_S
    barrier = threading.Barrier(len(per_thread) + 1)

    def worker(index: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        barrier.wait()
        for request in per_thread[index]:
            if time.perf_counter() > deadline:
                break
            started = time.perf_counter()
            conn.request(request.method, request.path, request.body, request.headers)
            response = conn.getresponse()
            response.read()
            latencies[index].append((time.perf_counter() - started) * 1000)
            statuses[index][response.status] = statuses[index].get(response.status, 0) + 1
        conn.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(per_thread))]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    merged: dict[int, int] = {}
    for part in statuses:
        for status, n in part.items():
            merged[status] = merged.get(status, 0) + n
    flat = [x for part in latencies for x in part]
    return PhaseResult(name, len(flat), elapsed, flat, merged)


def split(items: list, parts: int) -> list[list]:
    return [items[i::parts] for i in range(parts)]


# --- gunicorn ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(port: int, workers: int, threads: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            str(REPO / ".venv" / "bin" / "gunicorn"),
            "duel.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--worker-class",
            "gthread",
            "--threads",
            str(threads),
            "--log-level",
            "warning",
        ],
        cwd=REPO,
        env=dict(os.environ),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited early:\n{log.read_text()}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return proc
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("gunicorn did not answer within 60 s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


# --- report --------------------------------------------------------------------------------------


def report(phase: PhaseResult) -> None:
    codes = ", ".join(f"{code}: {n}" for code, n in sorted(phase.statuses.items()))
    print(
        f"{phase.name:<10} {phase.sent:>6} requests in {phase.elapsed_s:6.2f} s = "
        f"{phase.throughput:8.1f}/s   p50 {phase.percentile(0.5):7.2f} ms   "
        f"p99 {phase.percentile(0.99):7.2f} ms   [{codes}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--voters", type=int, default=300, help="assignments per phase")
    parser.add_argument("--heartbeats", type=int, default=10, help="heartbeats per assignment")
    parser.add_argument("--concurrency", type=int, default=8, help="client threads")
    parser.add_argument("--workers", type=int, default=max(2, (os.cpu_count() or 2)))
    parser.add_argument("--threads", type=int, default=4, help="gthread threads per worker")
    args = parser.parse_args()

    var_dir = Path(tempfile.mkdtemp(prefix="duel-bench-voting-"))
    configure_environment(str(var_dir))
    create_database()
    proc = None
    try:
        started = time.perf_counter()
        fresh, ready = seed(args.voters, var_dir)
        print(
            f"seeded {len(fresh)} + {len(ready)} assignments in "
            f"{time.perf_counter() - started:.1f} s (cache: "
            f"{'redis' if os.environ.get('REDIS_URL') else 'local memory, per worker'})"
        )
        port = free_port()
        proc = start_gunicorn(port, args.workers, args.threads, var_dir / "gunicorn.log")
        print(
            f"gunicorn: {args.workers} workers x {args.threads} threads (gthread), "
            f"client: {args.concurrency} threads, loopback, {os.cpu_count()} CPUs shared"
        )
        trivial_count = args.voters * args.heartbeats
        trivial = run_phase(
            "healthz",
            port,
            split([Request("GET", "/healthz")] * trivial_count, args.concurrency),
        )
        beats = run_phase(
            "heartbeat",
            port,
            [
                [r for ticket in part for r in heartbeat_requests(ticket, args.heartbeats)]
                for part in split(fresh, args.concurrency)
            ],
        )
        ballots = run_phase(
            "ballot",
            port,
            [
                [
                    signed(f"/vote/a/{t.token}/ballot", t, {"token": t.token, "choice": "first"})
                    for t in part
                ]
                for part in split(ready, args.concurrency)
            ],
        )
        print()
        for phase in (trivial, beats, ballots):
            report(phase)
        print()
        print(f"ballots accepted (201): {ballots.ok_per_s(201):.1f}/s")
        print(f"heartbeats accepted (200): {beats.ok_per_s(200):.1f}/s")
        for phase in (beats, ballots):
            throughput = phase.throughput / trivial.throughput
            p50 = phase.percentile(0.5) / trivial.percentile(0.5)
            p99 = phase.percentile(0.99) / trivial.percentile(0.99)
            print(
                f"{phase.name} vs trivial view: throughput x{throughput:.3f}, "
                f"p50 latency x{p50:.2f}, p99 latency x{p99:.2f}"
            )
    finally:
        if proc is not None:
            stop(proc)
        drop_database()


if __name__ == "__main__":
    main()
