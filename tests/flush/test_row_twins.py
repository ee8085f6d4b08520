"""Each fast path is held to its reference, on generated input (hypothesis).

:meth:`RowBuilder.build` (the fast path) gives exactly the row, or the same
:class:`AnswerError` (message and fields), or lets the same configuration error through, as
:meth:`RowBuilder._build_checked` (the reference, then the same typed-cell step) for
any answer: well-formed and malformed items, personal-info tokens valid, tampered, moved,
under an unknown key or of version 1, long and non-ASCII text (emoji, lone surrogates),
numbers, lists, None. (The times' fast twin, ``time_formatter``, is gone: it saved too
little of a batch. :func:`format_time`, the one left, gives the local wall time for any
time, in any zone, across offset changes.)
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import os
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support.examples import examples

from sheetsync.crypto import Keyring, answer_value_context
from sheetsync.errors import AnswerError, MissingKeyError
from sheetsync.flush.hydrate import MalformedAnswer
from sheetsync.flush.layout import FormLayout
from sheetsync.flush.rows import RowBuilder
from sheetsync.flush.times import format_time
from sheetsync.models import QuestionType
from sheetsync.settings import Settings

KEY = os.urandom(32)
KEYRING = Keyring([KEY], accept_version_1=False)
OTHER_KEYRING = Keyring([os.urandom(32)])  # its tokens name a key KEYRING does not have
SETTINGS = Settings.load(timezone="America/New_York", cell_chars_max=100)
LAYOUT = FormLayout.from_questions(
    "form_1",
    [
        ("intro", "안내", QuestionType.JUMBOTRON),
        ("name", "이름", QuestionType.SHORT_TEXT),
        ("phone", "연락처", QuestionType.PERSONAL_INFO),
        ("interests", "관심 분야", QuestionType.MULTI_CHOICE),
        ("email", "이메일", QuestionType.PERSONAL_INFO),
        ("count", "인원", QuestionType.NUMBER),
        ("when", "날짜", QuestionType.DATE),
        ("rating", "별점", "RATING"),  # a type this version does not know: text
    ],
)
BUILDERS = {
    "text": RowBuilder(LAYOUT, SETTINGS, keyring=KEYRING),
    "typed": RowBuilder(LAYOUT, SETTINGS, keyring=KEYRING, typed=True),
    "typed, escaped": RowBuilder(
        dataclasses.replace(LAYOUT, escape_formulas=True), SETTINGS, keyring=KEYRING, typed=True
    ),
}
PERSONAL = ("phone", "email")
PLAIN = ("name", "interests", "count", "when", "rating")
#: Hypothesis settings for the row properties: the machine may be busy (no deadline);
#: no example database in the tree.
ROWS = settings(
    max_examples=examples(300),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- what an answer may hold -----------------------------------------------------------

#: Any code point, lone surrogates included (JSON can carry them).
ANY_CHARACTER = st.characters(exclude_categories=())
TEXT = st.one_of(
    st.text(ANY_CHARACTER, max_size=12),
    st.text(ANY_CHARACTER, min_size=90, max_size=220),  # about the 100-unit cell limit
    st.sampled_from(
        [
            "",
            "개발팀",
            "🎉👍🏽 emoji",
            "🎉" * 51,  # 102 UTF-16 units in 51 characters
            "가" * 101,
            "lone \ud800 high",
            "\udfff",
            '=HYPERLINK("http://x","y")',
            "+1 555 0100",
            "-2",
            "0012",
            "2024-05-01",
            "3.5",
            "TRUE",
        ]
    ),
)
NUMBER = st.one_of(
    st.integers(), st.integers(min_value=10**20, max_value=10**40), st.floats(), st.booleans()
)
SCALAR = st.one_of(st.none(), NUMBER, TEXT)
#: Plaintexts of personal info: valid UTF-8 (no lone surrogates), marked so a message
#: that showed one would be caught.
PLAINTEXT = st.one_of(
    st.text(max_size=12), st.text(min_size=95, max_size=200), st.just("010-1234-5678")
).map(lambda text: "PII:" + text)

# A personal-info value is a plan, materialized for the answer and question it is the
# value of (tokens are bound to both): ("token", plaintext), or another kind below.
GOOD_TOKEN = PLAINTEXT.map(lambda text: ("token", text))
GOOD_PERSONAL = st.one_of(
    GOOD_TOKEN,
    st.lists(GOOD_TOKEN, max_size=3).map(lambda parts: ("tokens", parts)),
    st.sampled_from([("raw", None), ("raw", ""), ("raw", [])]),
)
BAD_TOKEN = st.tuples(
    st.sampled_from(["tampered", "cut", "other answer", "other question", "never encrypted"]),
    PLAINTEXT,
)
NOT_A_TOKEN = st.tuples(
    st.just("raw"),
    st.one_of(st.none(), NUMBER, st.lists(TEXT, max_size=1), st.dictionaries(TEXT, TEXT)),
)
UNKNOWN_KEY = PLAINTEXT.map(lambda text: ("unknown key", text))
REFUSED_PERSONAL = st.one_of(
    BAD_TOKEN,
    st.tuples(st.sampled_from(["unknown key", "version 1"]), PLAINTEXT),
    st.tuples(
        st.lists(GOOD_TOKEN, max_size=2),
        st.one_of(BAD_TOKEN, NOT_A_TOKEN, UNKNOWN_KEY),
        st.lists(GOOD_TOKEN, max_size=2),
    ).map(lambda parts: ("tokens", [*parts[0], parts[1], *parts[2]])),
    st.tuples(
        st.just("raw"),
        st.one_of(
            NUMBER,
            st.dictionaries(TEXT, SCALAR, max_size=2),
            st.lists(st.one_of(st.none(), NUMBER, st.lists(TEXT, max_size=1)), min_size=1),
        ),
    ),
)
GOOD_PLAIN = st.one_of(SCALAR, st.lists(st.one_of(TEXT, st.none(), NUMBER), max_size=4))
REFUSED_PLAIN = st.one_of(
    st.dictionaries(TEXT, SCALAR, max_size=2),
    st.tuples(
        st.lists(TEXT, max_size=2), st.one_of(st.dictionaries(TEXT, SCALAR), st.lists(SCALAR))
    ).map(lambda parts: [*parts[0], parts[1]]),
)


@st.composite
def good_item(draw: st.DrawFn) -> dict[str, Any]:
    """An item the form takes: its answer, or no value at all (an empty cell)."""
    question_id = draw(st.sampled_from(("intro", *PERSONAL, *PLAIN)))
    if draw(st.integers(0, 19)) == 0:
        return {"questionId": question_id}
    if question_id == "intro":  # display-only: any value at all
        value = draw(st.one_of(GOOD_PLAIN, REFUSED_PLAIN, REFUSED_PERSONAL))
    elif question_id in PERSONAL:
        value = draw(GOOD_PERSONAL)
    else:
        value = draw(GOOD_PLAIN)
    return {"questionId": question_id, "value": value}


@st.composite
def refused_item(draw: st.DrawFn) -> Any:
    """An item no row takes (or, a token under an unknown key, a configuration error)."""
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return {"questionId": draw(st.sampled_from(PERSONAL)), "value": draw(REFUSED_PERSONAL)}
    if kind == 1:
        return {"questionId": draw(st.sampled_from(PLAIN)), "value": draw(REFUSED_PLAIN)}
    if kind == 2:  # a question the form does not have (a long id is cut in the message)
        question_id = draw(
            st.one_of(TEXT, st.text(min_size=129, max_size=300)).filter(
                lambda text: text not in LAYOUT.question_ids and text != "intro"
            )
        )
        return {"questionId": question_id, "value": draw(GOOD_PLAIN)}
    if kind == 3:  # no question id, or one that is not a string
        return draw(
            st.one_of(
                st.builds(lambda value: {"value": value}, SCALAR),
                st.builds(
                    lambda question_id: {"questionId": question_id, "value": "x"},
                    st.one_of(NUMBER, st.none(), st.lists(TEXT, max_size=1), st.just({})),
                ),
            )
        )
    return draw(st.one_of(SCALAR, st.lists(TEXT, max_size=2)))  # not an object


@dataclasses.dataclass(frozen=True)
class Case:
    """One answer as generated: personal info still as plans (see materialize)."""

    builder: str
    answer_id: str
    user_name: str | None
    submitted_at: datetime
    container: str  # list, tuple, iterator, or document (a document that is not items)
    items: Any


ANSWER_ID = st.from_regex(r"\Aans_[0-9a-z]{1,10}\Z")
USER_NAME = st.one_of(st.none(), TEXT)
#: Mostly about New York's fall-back hour (the builders' zone); some anywhere else.
SUBMITTED_AT = st.one_of(
    st.integers(0, 4 * 3600).map(
        lambda s: datetime(2024, 11, 3, 4, tzinfo=UTC) + timedelta(seconds=s, microseconds=7)
    ),
    st.datetimes(
        min_value=datetime(1800, 1, 1),
        max_value=datetime(2200, 1, 1),
        timezones=st.sampled_from([UTC, ZoneInfo("Asia/Seoul"), timezone(timedelta(hours=-3))]),
    ),
)
ODD_DOCUMENT = st.one_of(
    NUMBER,
    st.none(),
    TEXT,
    st.dictionaries(st.sampled_from(["questionId", "value"]), TEXT),
    st.builds(
        MalformedAnswer,
        st.sampled_from(["answer", "submitted_at"]),
        st.sampled_from(["JSONDecodeError", "DataError"]),
    ),
)


@st.composite
def answers(draw: st.DrawFn, *, refused: bool | None = None, unknown_key: bool = False) -> Case:
    """An answer: well-formed (refused=False), with at least one refused item or a
    document that is not items (True), or anything (None: either, or both mixed); with
    ``unknown_key``, well-formed but for one token under a key the keyring lacks."""
    if refused is None:
        items = draw(st.lists(st.one_of(good_item(), refused_item()), max_size=8))
    else:
        items = draw(st.lists(good_item(), max_size=8))
    container = draw(st.sampled_from(["list", "list", "list", "tuple", "iterator"]))
    if refused:
        if draw(st.integers(0, 4)) == 0:
            container, items = "document", draw(ODD_DOCUMENT)
        else:
            items.insert(draw(st.integers(0, len(items))), draw(refused_item()))
    elif refused is None and draw(st.integers(0, 19)) == 0:
        container, items = "document", draw(ODD_DOCUMENT)
    if unknown_key:
        question_id = draw(st.sampled_from(PERSONAL))
        value = draw(st.one_of(UNKNOWN_KEY, UNKNOWN_KEY.map(lambda plan: ("tokens", [plan]))))
        items.insert(draw(st.integers(0, len(items))), {"questionId": question_id, "value": value})
    return Case(
        builder=draw(st.sampled_from(sorted(BUILDERS))),
        answer_id=draw(ANSWER_ID),
        user_name=draw(USER_NAME),
        submitted_at=draw(SUBMITTED_AT),
        container=container,
        items=items,
    )


def _v1_token(plaintext: str) -> str:
    """A token as version 1 wrote it (bound to no answer): refused by KEYRING."""
    header = b"\x01" + hashlib.sha256(KEY).digest()[:4]
    nonce = os.urandom(12)
    sealed = AESGCM(KEY).encrypt(nonce, plaintext.encode(), header)
    return base64.urlsafe_b64encode(header + nonce + sealed).rstrip(b"=").decode()


def _token(plan: Any, answer_id: str, question_id: str) -> Any:
    kind, what = plan
    context = answer_value_context(answer_id, question_id)
    if kind == "raw":
        return what
    if kind == "tokens":
        return [_token(part, answer_id, question_id) for part in what]
    if kind == "token":
        return KEYRING.encrypt(what, context)
    if kind == "tampered":
        token = KEYRING.encrypt(what, context)
        middle = len(token) // 2
        return token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]
    if kind == "cut":
        return KEYRING.encrypt(what, context)[:-5]
    if kind == "other answer":
        return KEYRING.encrypt(what, answer_value_context(answer_id + "_other", question_id))
    if kind == "other question":
        other = "email" if question_id == "phone" else "phone"
        return KEYRING.encrypt(what, answer_value_context(answer_id, other))
    if kind == "never encrypted":
        return what
    if kind == "unknown key":
        return OTHER_KEYRING.encrypt(what, context)
    assert kind == "version 1", kind
    return _v1_token(what)


def materialize(case: Case) -> Callable[[], Any]:
    """The answer's document, with tokens made for it: a function giving a new copy of
    the container each time (an iterator is read once)."""
    if case.container == "document":
        return lambda: case.items
    items = []
    for item in case.items:
        if (
            isinstance(item, dict)
            and item.get("questionId") in PERSONAL
            and isinstance(item.get("value"), tuple)
        ):
            value = _token(item["value"], case.answer_id, item["questionId"])
            items.append({**item, "value": value})
        else:
            items.append(item)
    if case.container == "tuple":
        return lambda: tuple(items)
    if case.container == "iterator":
        return lambda: iter(items)
    return lambda: list(items)


def _plaintexts(value: Any) -> Iterator[str]:
    """The personal-info plaintexts in an answer's plans."""
    if isinstance(value, str) and value.startswith("PII:") and len(value) > 6:
        yield value
    elif isinstance(value, list | tuple):
        for part in value:
            yield from _plaintexts(part)
    elif isinstance(value, dict):
        for part in value.values():
            yield from _plaintexts(part)


def _outcome(build: Callable[..., Any], case: Case, document: Callable[[], Any]) -> Any:
    """A row (as repr: NaN equals itself, -0.0 differs from 0.0), an AnswerError's
    message and fields, or a MissingKeyError's message."""
    try:
        return ("row", repr(build(case.answer_id, case.user_name, case.submitted_at, document())))
    except AnswerError as exc:
        return ("error", str(exc), exc.fields)
    except MissingKeyError as exc:
        return ("missing key", str(exc))


def _reference(builder: RowBuilder) -> Callable[..., Any]:
    def build(answer_id: str, user_name: str | None, submitted_at: datetime, items: Any) -> Any:
        row = builder._build_checked(answer_id, user_name, submitted_at, items)
        return builder._typed_row(row, submitted_at)

    return build


_KIND = r"(?:null|a boolean|a number|a string|a list|an object|a \w+)"
_WHAT = "|".join(
    [
        r"column (?:answer|submitted_at) cannot be read",
        rf"the answer is {_KIND}, not a list of items",
        rf"answer\[\d+\] is {_KIND}, not an object",
        r"answer\[\d+\] has no questionId",
        rf"answer\[\d+\] has a questionId that is {_KIND}",
        r"the form has no such question",
        rf"personal info is (?:{_KIND}|a list with {_KIND} in it), not a token or a list of "
        r"tokens",
        rf"the value is (?:{_KIND}|a list with {_KIND} in it), which a cell cannot show",
        re.escape(
            "the personal-info token is version 1, bound to no answer: refused unless "
            "SHEETSYNC_PII_ACCEPT_V1_TOKENS=true"
        ),
        re.escape(
            "the personal-info token fails authentication: tampered, corrupt, or made for "
            "another answer or question"
        ),
        r"unexpected error while building the row",
    ]
)


def check_same_outcome(case: Case) -> Any:
    """Both paths' outcome, asserted equal; an error's message is one of the known
    reasons, naming the answer and question only (never a value or a token)."""
    builder = BUILDERS[case.builder]
    document = materialize(case)
    fast = _outcome(builder.build, case, document)
    reference = _outcome(_reference(builder), case, document)
    assert fast == reference
    event(fast[0] if fast[0] != "error" else f"error: {fast[2]['error_class']}")
    if fast[0] == "error":
        message, fields = fast[1], fast[2]
        assert fields["answer_id"] == case.answer_id
        question = fields["question_id"]
        shown = question or "-"  # an empty question id is shown as none
        pattern = (
            rf"answer {re.escape(case.answer_id)}, question {re.escape(shown)}: "
            rf"(?:{_WHAT}) \({re.escape(fields['error_class'])}\)"
        )
        assert re.fullmatch(pattern, message, re.DOTALL), message
        assert question is None or len(question) <= 129
        assert len(message) < 400
        assert not [text for text in _plaintexts(case.items) if text in message]
    return fast


@ROWS
@given(answers())
def test_build_gives_the_references_row_or_error_for_any_answer(case: Case) -> None:
    check_same_outcome(case)


@ROWS
@given(answers(refused=False))
def test_a_well_formed_answer_gives_the_references_row(case: Case) -> None:
    outcome = check_same_outcome(case)
    if case.submitted_at.year < 9999:
        assert outcome[0] == "row", outcome


@ROWS
@given(answers(refused=True))
def test_an_answer_with_a_refused_item_gives_the_references_error(case: Case) -> None:
    outcome = check_same_outcome(case)
    assert outcome[0] in ("error", "missing key"), outcome


@ROWS
@given(answers(refused=False, unknown_key=True))
def test_a_token_under_an_unknown_key_is_the_same_configuration_error(case: Case) -> None:
    outcome = check_same_outcome(case)
    if case.submitted_at.year < 9999:
        assert outcome[0] == "missing key", outcome
        assert "SHEETSYNC_PII_KEYS" in outcome[1]


# -- times -----------------------------------------------------------------------------

ZONE_NAMES = [
    "Asia/Seoul",
    "UTC",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",  # moves by half an hour, mid-UTC-hour
    "Asia/Kathmandu",
    "America/St_Johns",
    "Pacific/Chatham",
    "Africa/Casablanca",  # leaves DST for Ramadan
    "Pacific/Apia",  # skipped a whole day (2011-12-30)
]
ZONES: list[tzinfo] = [ZoneInfo(name) for name in ZONE_NAMES]
ZONES += [UTC, timezone(timedelta(hours=5, minutes=45)), timezone(timedelta(hours=-12))]
#: Other zones a value may arrive in.
ARRIVALS = st.sampled_from(
    [UTC, timezone(timedelta(hours=-3, minutes=-30)), ZoneInfo("Asia/Tokyo"), *ZONES]
)


@functools.cache
def _offset_changes(zone: tzinfo) -> tuple[datetime, ...]:
    """The UTC hours in which ``zone``'s offset changes, in a few years."""
    changes = []
    for year in (1890, 1950, 2011, 2024, 2100):
        hour = datetime(year, 1, 1, tzinfo=UTC)
        offset = hour.astimezone(zone).utcoffset()
        while hour.year == year:
            following = hour + timedelta(hours=1)
            next_offset = following.astimezone(zone).utcoffset()
            if next_offset != offset:
                changes.append(hour)
            hour, offset = following, next_offset
    return tuple(changes) or (datetime(2024, 1, 1, tzinfo=UTC),)


@st.composite
def times(draw: st.DrawFn) -> tuple[tzinfo, datetime]:
    """A zone and a time: near one of its offset changes (in UTC, in another zone, or
    naive), anywhere in datetime's range (aware or naive), or at its ends."""
    zone = draw(st.sampled_from(ZONES))
    kind = draw(st.integers(0, 3))
    if kind <= 1:
        change = draw(st.sampled_from(_offset_changes(zone)))
        value = change + timedelta(
            seconds=draw(st.integers(-3 * 3600, 3 * 3600)),
            microseconds=draw(st.integers(0, 999_999)),
        )
        arrival = draw(st.one_of(st.none(), ARRIVALS))  # None: naive, taken as UTC
        value = value.replace(tzinfo=None) if arrival is None else value.astimezone(arrival)
    elif kind == 2:
        value = draw(st.datetimes(timezones=st.one_of(st.none(), ARRIVALS)))
    else:
        value = draw(
            st.sampled_from([datetime.min, datetime.max]).flatmap(
                lambda end: st.sampled_from([end, end.replace(tzinfo=UTC)])
            )
        )
    return zone, value


def _formatted(format_: Callable[[], str]) -> tuple[str, Any]:
    try:
        return ("text", format_())
    except (OverflowError, ValueError) as exc:
        return ("error", type(exc))


def _wall_time(value: datetime, zone: tzinfo) -> str:
    """What a clock in ``zone`` shows at ``value`` (naive: UTC), field by field."""
    local = (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(zone)
    return (
        f"{local.year:04d}-{local.month:02d}-{local.day:02d} "
        f"{local.hour:02d}:{local.minute:02d}:{local.second:02d}"
    )


@settings(max_examples=examples(2000), deadline=None, database=None)
@given(times())
def test_format_time_gives_the_local_wall_time(zone_and_time: tuple[tzinfo, datetime]) -> None:
    zone, value = zone_and_time
    expected = _formatted(lambda: _wall_time(value, zone))
    assert _formatted(lambda: format_time(value, zone)) == expected
