"""A small formula evaluator, so that USER_ENTERED formulas show a value in demos.

It covers arithmetic (``+ - * / ^``, unary minus, parentheses), text (``"..."``, ``&``),
``TRUE``/``FALSE``, references to cells of the same sheet (``A1``, and ranges such as
``A1:B3`` or ``A:A`` inside functions), and the functions SUM, AVERAGE, MIN, MAX, LEN,
UPPER, LOWER, CONCATENATE and HYPERLINK. Anything else evaluates to an error code as
Sheets shows it: ``#NAME?`` (unknown function), ``#ERROR!`` (parse error), ``#VALUE!``,
``#DIV/0!`` or ``#REF!`` (another sheet, or a reference cycle).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from sheets_emulator.a1 import RangeParseError, parse_cells
from sheets_emulator.cells import CellValue, Formula, Scalar
from sheets_emulator.errors import EmulatorError

#: Nested formula references deeper than this are treated as a cycle.
MAX_DEPTH = 64

_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<range>\$?[A-Za-z]{1,3}\$?\d*:\$?[A-Za-z]{1,3}\$?\d*|\$?\d+:\$?\d+)"
    r"|(?P<number>\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+)"
    r'|(?P<string>"(?:[^"]|"")*")'
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_.]*!?)"
    r"|(?P<op>[-+*/^&(),])"
    r")"
)
_CELL = re.compile(r"^\$?([A-Za-z]{1,3})\$?(\d+)$")

Value = Scalar | list[Scalar | None] | None


class FormulaError(EmulatorError):
    """Evaluation failed; ``code`` is what the cell shows (``#VALUE!`` etc.)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True)
class SheetView:
    """What a formula may look at: one cell, and how far the data goes."""

    cell: Callable[[int, int], CellValue | None]
    rows: int
    columns: int


def evaluate(formula: Formula, sheet: SheetView, depth: int = 0) -> Scalar:
    """The value of ``formula`` on ``sheet``; errors come back as their code string."""
    if depth > MAX_DEPTH:
        return "#REF!"
    try:
        parser = _Parser(_tokenize(formula.text[1:]), sheet, depth)
        value = parser.parse()
    except FormulaError as error:
        return error.code
    if isinstance(value, list):
        return "#VALUE!"
    if isinstance(value, float):
        return _tidy(value)
    return "" if value is None else value


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise FormulaError("#ERROR!")
        kind = match.lastgroup
        assert kind is not None
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], sheet: SheetView, depth: int) -> None:
        self.tokens = tokens
        self.position = 0
        self.sheet = sheet
        self.depth = depth

    def parse(self) -> Value:
        value = self.concat()
        if self.position != len(self.tokens):
            raise FormulaError("#ERROR!")
        return value

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, op: str) -> bool:
        if self.peek() == ("op", op):
            self.position += 1
            return True
        return False

    def concat(self) -> Value:
        value = self.additive()
        while self.take("&"):
            value = _text(value) + _text(self.additive())
        return value

    def additive(self) -> Value:
        value = self.term()
        while True:
            if self.take("+"):
                value = _number(value) + _number(self.term())
            elif self.take("-"):
                value = _number(value) - _number(self.term())
            else:
                return value

    def term(self) -> Value:
        value = self.power()
        while True:
            if self.take("*"):
                value = _number(value) * _number(self.power())
            elif self.take("/"):
                divisor = _number(self.power())
                if divisor == 0:
                    raise FormulaError("#DIV/0!")
                value = _number(value) / divisor
            else:
                return value

    def power(self) -> Value:
        value = self.unary()
        while self.take("^"):
            try:
                value = float(_number(value) ** _number(self.unary()))
            except (OverflowError, ZeroDivisionError) as error:
                raise FormulaError("#NUM!") from error
        return value

    def unary(self) -> Value:
        if self.take("-"):
            return -_number(self.unary())
        if self.take("+"):
            return _number(self.unary())
        return self.primary()

    def primary(self) -> Value:
        token = self.peek()
        if token is None:
            raise FormulaError("#ERROR!")
        self.position += 1
        kind, text = token
        if kind == "number":
            return _tidy(float(text))
        if kind == "string":
            return text[1:-1].replace('""', '"')
        if kind == "range":
            return self.range_values(text)
        if kind == "name":
            return self.name(text)
        if text == "(":
            value = self.concat()
            if not self.take(")"):
                raise FormulaError("#ERROR!")
            return value
        raise FormulaError("#ERROR!")

    def name(self, text: str) -> Value:
        if text.endswith("!"):
            raise FormulaError("#REF!")  # other sheets are not evaluated
        upper = text.upper()
        if self.take("("):
            return _call(upper, self.arguments())
        if upper in ("TRUE", "FALSE"):
            return upper == "TRUE"
        cell = _CELL.match(text)
        if cell is None:
            raise FormulaError("#NAME?")
        return self.range_values(f"{text}:{text}")[0]

    def arguments(self) -> list[Value]:
        arguments: list[Value] = []
        if self.take(")"):
            return arguments
        while True:
            arguments.append(self.concat())
            if self.take(")"):
                return arguments
            if not self.take(","):
                raise FormulaError("#ERROR!")

    def range_values(self, text: str) -> list[Scalar | None]:
        try:
            parsed = parse_cells(text.replace("$", ""))
        except RangeParseError as error:
            raise FormulaError("#REF!") from error
        end_row = min(parsed.end_row or self.sheet.rows, self.sheet.rows)
        end_col = min(parsed.end_col or self.sheet.columns, self.sheet.columns)
        values: list[Scalar | None] = []
        for row in range(parsed.start_row, max(end_row, parsed.start_row + 1)):
            for col in range(parsed.start_col, max(end_col, parsed.start_col + 1)):
                cell = self.sheet.cell(row, col)
                if isinstance(cell, Formula):
                    cell = evaluate(cell, self.sheet, self.depth + 1)
                    if cell == "#REF!":
                        raise FormulaError("#REF!")
                values.append(cell)
        return values


def _tidy(number: float) -> int | float:
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def _number(value: Value) -> float:
    if isinstance(value, list):
        if len(value) != 1:
            raise FormulaError("#VALUE!")
        value = value[0]
    if value is None or value == "":
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    if value.startswith("#"):
        raise FormulaError(value)
    try:
        return float(value)
    except ValueError as error:
        raise FormulaError("#VALUE!") from error


def _text(value: Value) -> str:
    if isinstance(value, list):
        if len(value) != 1:
            raise FormulaError("#VALUE!")
        value = value[0]
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return str(_tidy(float(value)))
    return value


def _numbers_in(arguments: list[Value]) -> list[float]:
    numbers: list[float] = []
    for argument in arguments:
        if isinstance(argument, list):
            numbers.extend(
                float(item)
                for item in argument
                if isinstance(item, int | float) and not isinstance(item, bool)
            )
        else:
            numbers.append(_number(argument))
    return numbers


def _call(name: str, arguments: list[Value]) -> Value:
    if name == "SUM":
        return _tidy(sum(_numbers_in(arguments)))
    if name in ("AVERAGE", "MIN", "MAX"):
        numbers = _numbers_in(arguments)
        if not numbers:
            if name == "AVERAGE":
                raise FormulaError("#DIV/0!")
            return 0
        result = {"AVERAGE": sum(numbers) / len(numbers), "MIN": min(numbers)}
        return _tidy(result.get(name, max(numbers)))
    if name == "CONCATENATE":
        return "".join(
            _text(item)
            for argument in arguments
            for item in (argument if isinstance(argument, list) else [argument])
        )
    if name in ("LEN", "UPPER", "LOWER") and len(arguments) == 1:
        text = _text(arguments[0])
        if name == "LEN":
            return len(text)
        return text.upper() if name == "UPPER" else text.lower()
    if name == "HYPERLINK" and len(arguments) in (1, 2):
        return _text(arguments[-1])
    raise FormulaError("#NAME?")
