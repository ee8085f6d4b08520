"""Small HTML pages for demos: the spreadsheet index and a sheet as a table.

Everything that comes from data (titles, ids, cell text) is escaped.
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from sheets_emulator.a1 import column_letters
from sheets_emulator.sheets import Sheet, Spreadsheet

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #202124; }
table { border-collapse: collapse; font-size: 0.9rem; width: max-content; }
th, td { border: 1px solid #dadce0; padding: 0.25rem 0.5rem; text-align: left;
         vertical-align: top; white-space: pre-wrap; }
th { background: #f1f3f4; font-weight: 500; }
td.n { text-align: right; }
.muted { color: #5f6368; }
"""


def _page(title: str, body: str, refresh_s: int | None = None) -> str:
    refresh = f"<meta http-equiv='refresh' content='{refresh_s}'>" if refresh_s else ""
    return (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>{refresh}"
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body>{body}</body></html>\n"
    )


def _sheet_link(spreadsheet: Spreadsheet, sheet: Sheet) -> str:
    href = (
        f"/_emulator/spreadsheets/{quote(spreadsheet.spreadsheet_id, safe='')}"
        f"/sheets/{sheet.sheet_id}"
    )
    return f"<a href='{escape(href)}'>{escape(sheet.title)}</a>"


def index_page(spreadsheets: list[Spreadsheet]) -> str:
    """``GET /_emulator/``: every spreadsheet, with links to its sheets."""
    if not spreadsheets:
        rows = "<tr><td colspan='4' class='muted'>No spreadsheets yet.</td></tr>"
    else:
        rows = "".join(
            "<tr>"
            f"<td>{escape(spreadsheet.title)}</td>"
            f"<td><code>{escape(spreadsheet.spreadsheet_id)}</code></td>"
            f"<td>{escape(spreadsheet.owner)}</td>"
            f"<td>{', '.join(_sheet_link(spreadsheet, sheet) for sheet in spreadsheet.sheets)}</td>"
            "</tr>"
            for spreadsheet in spreadsheets
        )
    body = (
        "<h1>Sheets API emulator</h1>"
        "<p class='muted'>In-memory spreadsheets. JSON: "
        "<a href='/_emulator/spreadsheets'>spreadsheets</a>, "
        "<a href='/_emulator/stats'>stats</a>, <a href='/_emulator/quotas'>quotas</a>, "
        "<a href='/_emulator/faults'>faults</a>.</p>"
        "<table><tr><th>Title</th><th>Spreadsheet id</th><th>Owner</th><th>Sheets</th></tr>"
        f"{rows}</table>"
    )
    return _page("Sheets API emulator", body)


def spreadsheet_page(spreadsheet: Spreadsheet) -> str:
    """``GET /_emulator/spreadsheets/{id}``: the spreadsheet's sheets."""
    items = "".join(
        f"<li>{_sheet_link(spreadsheet, sheet)} "
        f"<span class='muted'>gid {sheet.sheet_id}, {len(sheet.rows)} rows with data</span></li>"
        for sheet in spreadsheet.sheets
    )
    body = (
        f"<p><a href='/_emulator/'>All spreadsheets</a></p><h1>{escape(spreadsheet.title)}</h1>"
        f"<p class='muted'>{escape(spreadsheet.spreadsheet_id)}, owner "
        f"{escape(spreadsheet.owner)}</p><ul>{items}</ul>"
    )
    return _page(spreadsheet.title, body)


def sheet_page(
    spreadsheet: Spreadsheet,
    sheet: Sheet,
    values: list[list[str]],
    numeric: set[tuple[int, int]] | None = None,
    refresh_s: int | None = None,
) -> str:
    """``GET /_emulator/spreadsheets/{id}/sheets/{gid}`` as an HTML table: values as Sheets
    shows them, numbers and dates (``numeric``: row, column) aligned right; reloaded
    every ``refresh_s`` seconds if given."""
    numeric = numeric or set()
    width = max((len(row) for row in values), default=0)
    header = "<tr><th></th>" + "".join(f"<th>{column_letters(col)}</th>" for col in range(width))
    rows = "".join(
        f"<tr><th>{number}</th>"
        + "".join(
            f"<td class='n'>{escape(cell)}</td>"
            if (number - 1, col) in numeric
            else f"<td>{escape(cell)}</td>"
            for col, cell in enumerate(row)
        )
        + "<td></td>" * (width - len(row))
        + "</tr>"
        for number, row in enumerate(values, start=1)
    )
    empty = "" if values else "<p class='muted'>This sheet is empty.</p>"
    body = (
        f"<p><a href='/_emulator/spreadsheets/{quote(spreadsheet.spreadsheet_id, safe='')}'>"
        f"{escape(spreadsheet.title)}</a></p><h1>{escape(sheet.title)}</h1>"
        f"<p class='muted'>gid {sheet.sheet_id}, grid {sheet.row_count} x "
        f"{sheet.column_count}</p>{empty}<table>{header}</tr>{rows}</table>"
    )
    return _page(f"{sheet.title} - {spreadsheet.title}", body, refresh_s)
