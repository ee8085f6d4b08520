"""Dead letters and their replay: answer ids a buffer could not deliver, kept in the
database until a replay hands them back to their buffer.

The package owns every change of a dead letter's status; the command line, the console,
the tasks and the flush only call it.

- :mod:`~sheetsync.deadletters.store`: park ids, read an entry's ids, make entries due,
  fail, purge.
- :mod:`~sheetsync.deadletters.replay`: a replay, from the claim to the ids back in their
  buffer: beat's dispatch, the replay task, and an operator's replay.
- :mod:`~sheetsync.deadletters.replay_end`: a replay is DONE once none of its ids is
  ENQUEUED; the flush run that settles the last says so.
- :mod:`~sheetsync.deadletters.queries`: dead letters as an operator reads them.

The replay's ids go through the one write path every answer takes (the flush);
``sheetsync dlq replay --now`` then drives that flush in its own process
(:func:`sheetsync.flush.here.flush_here`).

    PENDING ──claim_due──► REPLAYING ──complete_replays──► DONE (every id settled)
       ▲                      │ reschedule / release
       └──────────────────────┘
    FAILED (permanent: replayed only by hand)      PURGED (an operator gave up)

See docs/ARCHITECTURE.md, "Dead letters".
"""
