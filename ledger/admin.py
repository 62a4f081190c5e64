"""Read-only staff view of the transparency log: entries and checkpoints can only be read.

The log is written by services in the same transaction as the change it records; nothing is
ever edited here (the database refuses it anyway). A correction is appended by the service
of the app whose record is corrected, through ``ledger.services.correction_append``.
"""

from __future__ import annotations

from django.contrib import admin

from ledger.models import Checkpoint, LogEntry


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(LogEntry)
class LogEntryAdmin(ReadOnlyAdmin):
    list_display = ("index", "kind", "subject", "timestamp", "supersedes")
    list_filter = ("kind",)
    search_fields = ("subject",)
    ordering = ("-index",)
    show_full_result_count = False
    list_select_related = ("supersedes",)
    exclude = ("entry_bytes", "leaf_hash", "key_id", "signature")
    readonly_fields = ("leaf_hash_hex",)

    @admin.display(description="leaf hash")
    def leaf_hash_hex(self, entry: LogEntry) -> str:
        return bytes(entry.leaf_hash).hex()


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = ("tree_size", "created_at")
    ordering = ("-tree_size",)
    exclude = ("root_hash",)
    readonly_fields = ("root_hash_hex",)

    @admin.display(description="root hash")
    def root_hash_hex(self, checkpoint: Checkpoint) -> str:
        return bytes(checkpoint.root_hash).hex()
