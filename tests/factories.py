"""Realistic forms, answers and sheet links for tests. They live in :mod:`sheetsync.seed`
(the demo and the benchmarks use them too); this module re-exports them so tests keep
their short imports."""

from sheetsync.seed import (
    DEFAULT_ANSWER_SPACING,
    DEFAULT_FIRST_SUBMITTED_AT,
    DEFAULT_OWNER_ID,
    SeededForm,
    SeededQuestion,
    answer_ids_for,
    answer_items,
    answer_value,
    korean_name,
    link_sheet,
    new_id,
    seed_answers,
    seed_form,
    seed_user,
)

__all__ = [
    "DEFAULT_ANSWER_SPACING",
    "DEFAULT_FIRST_SUBMITTED_AT",
    "DEFAULT_OWNER_ID",
    "SeededForm",
    "SeededQuestion",
    "answer_ids_for",
    "answer_items",
    "answer_value",
    "korean_name",
    "link_sheet",
    "new_id",
    "seed_answers",
    "seed_form",
    "seed_user",
]
