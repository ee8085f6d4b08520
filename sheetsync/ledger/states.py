"""The ledger's states as groups: which a flush, a change and an emit may move on from."""

from __future__ import annotations

from sheetsync.models import TransactionType

#: States after which a flush must not append the answer again.
SETTLED = frozenset(
    {
        TransactionType.COMPLETED,
        TransactionType.DEAD_LETTERED,
        TransactionType.FAILED,
        TransactionType.DELETED,
    }
)
#: States no later write moves a row out of, but a change: COMPLETED only to DELETED.
TERMINAL = (TransactionType.COMPLETED.value, TransactionType.DELETED.value)
#: States whose (answer, sheet) an edit or a deletion applies to: the answer was emitted
#: there, and is not deleted already.
CHANGEABLE = (
    TransactionType.ENQUEUED.value,
    TransactionType.COMPLETED.value,
    TransactionType.FAILED.value,
    TransactionType.DEAD_LETTERED.value,
)
#: States an emit may move on from: an (answer, sheet) in any other state was emitted
#: already (ENQUEUED, or settled), and emitting it again (a web retry, a double submit)
#: changes nothing.
EMITTABLE = (TransactionType.INIT.value, TransactionType.VALIDATION_FAILED.value)
#: Rows per upsert statement (keeps bind parameters under SQLite's limit).
UPSERT_CHUNK = 2000
