"""``python -m ledger.verifier``: a real HTTP client that needs only the URL and the public key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection, transaction

from ledger import keys, services
from ledger.models import EntryKind, LogEntry

REPO = Path(__file__).resolve().parents[2]


def run_verifier(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ledger.verifier", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_verifier_module_imports_nothing_from_django():
    code = (
        "import sys, ledger.verifier\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'duel'))\n"
        "print(loaded)\n"
        "sys.exit(1 if loaded else 0)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_bad_key_argument_is_a_usage_error():
    result = run_verifier("http://127.0.0.1:9/api/v1/log", "--key", "not-a-key")
    assert result.returncode == 2
    assert "--key" in result.stderr


@pytest.mark.services
def test_the_cli_verifies_a_live_log_and_catches_tampering(
    transactional_db, require_postgres, live_server, tmp_path
):
    for i in range(12):
        services.entry_append(kind=EntryKind.OUTPUT_HASH, subject="run:1", payload={"n": i})
    url = f"{live_server.url}/api/v1/log"
    key = str(keys.verifier_key())
    saved = tmp_path / "checkpoint.txt"

    first = run_verifier(url, "--key", key, "--checkpoint", str(saved))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "entries checked: 12" in first.stdout
    assert saved.read_text().startswith(f"{keys.origin()}\n12\n")

    services.entry_append(kind=EntryKind.MANIFEST, subject="run:1", payload={"n": 12})
    key_file = tmp_path / "log.vkey"
    key_file.write_text(key + "\n")
    second = run_verifier(url, "--key", str(key_file), "--checkpoint", str(saved))
    assert second.returncode == 0, second.stdout + second.stderr
    assert saved.read_text().startswith(f"{keys.origin()}\n13\n")

    forged = bytes(LogEntry.objects.get(index=7).entry_bytes).replace(b'"n":7', b'"n":70')
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        LogEntry.objects.filter(index=7).update(entry_bytes=forged)
    third = run_verifier(url, "--key", key, "--checkpoint", str(saved))
    assert third.returncode == 1
    assert "first bad index: 7" in third.stdout
    assert saved.read_text().startswith(f"{keys.origin()}\n13\n")  # not replaced on failure
