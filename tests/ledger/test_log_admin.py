"""Staff can read the log in the admin and can change nothing there."""

from __future__ import annotations

import pytest

from ledger import services
from ledger.models import EntryKind

pytestmark = pytest.mark.django_db


def test_entries_and_checkpoints_are_listed_read_only(admin_client):
    entry = services.entry_append(kind=EntryKind.PROMPT_HASH, subject="round:1", payload={})
    services.checkpoint_publish()
    listing = admin_client.get("/admin/ledger/logentry/")
    assert listing.status_code == 200
    assert b"round:1" in listing.content
    detail = admin_client.get(f"/admin/ledger/logentry/{entry.index}/change/")
    assert detail.status_code == 200
    assert bytes(entry.leaf_hash).hex().encode() in detail.content
    assert b'name="_save"' not in detail.content
    assert admin_client.get("/admin/ledger/logentry/add/").status_code == 403
    assert admin_client.get("/admin/ledger/checkpoint/").status_code == 200
    assert admin_client.post(f"/admin/ledger/logentry/{entry.index}/delete/").status_code == 403
