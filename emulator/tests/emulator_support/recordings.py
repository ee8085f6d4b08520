"""Replay recordings of the real Sheets API (vcrpy cassettes) against the emulator.

See ``google_recordings/README.md`` (beside the tests) for where they come from and how ids and
Drive calls are translated. Each Sheets interaction becomes an :class:`Outcome`: whether
the emulator answered as Google did (status, JSON keys and values) and, if not, where
the answers differ.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sheets_emulator import EmulatorAdmin

RECORDINGS = Path(__file__).resolve().parent.parent / "google_recordings"
SHEETS_HOST = "sheets.googleapis.com"
DRIVE_FILES = "/drive/v3/files"
#: Keys that depend on the environment, or on formatting the emulator does not model.
IGNORED_KEYS = frozenset({"spreadsheetUrl", "defaultFormat", "spreadsheetTheme"})
#: The calls that write and read rows (every call sheetsync makes): each one must match.
MUST_MATCH_KINDS = frozenset(
    {"values.append", "values.get", "values.update", "spreadsheets.get", "spreadsheets.batchUpdate"}
)
STRANGER = "stranger"

_SPREADSHEET_PATH = re.compile(r"^/v4/spreadsheets/([^/:?]+)")


@dataclass
class Outcome:
    cassette: str
    position: int
    kind: str
    method: str
    uri: str
    differences: list[str] = field(default_factory=list)

    @property
    def matched(self) -> bool:
        return not self.differences

    def describe(self) -> str:
        return f"{self.cassette}#{self.position} {self.method} {self.uri}: " + "; ".join(
            self.differences
        )


def cassettes() -> list[Path]:
    return sorted(RECORDINGS.glob("*.json"))


def kind_of(method: str, path: str) -> str:
    """The API method of a recorded Sheets request, e.g. ``values.append``."""
    rest = path[len("/v4/spreadsheets") :]
    for verb in ("batchGet", "batchUpdate", "batchClear"):
        if f"/values:{verb}" in rest:
            return f"values.{verb}"
    if ":batchUpdate" in rest:
        return "spreadsheets.batchUpdate"
    if "/values/" in rest:
        if rest.endswith(":append"):
            return "values.append"
        if rest.endswith(":clear"):
            return "values.clear"
        return "values.update" if method == "PUT" else "values.get"
    return "spreadsheets.get" if method == "GET" else "spreadsheets.create"


class Replayer:
    """Replays cassettes through ``http`` (an authorised httplib2 client of the account
    that owns what the cassettes create); ``admin`` sets up what Drive did."""

    def __init__(self, base_url: str, http: Any, admin: EmulatorAdmin) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = http
        self.admin = admin

    def replay(self, path: Path) -> list[Outcome]:
        interactions = json.loads(path.read_text(encoding="utf-8"))["interactions"]
        spreadsheet_ids: dict[str, str] = {}
        sheet_ids: dict[int, int] = {}
        outcomes: list[Outcome] = []
        for position, interaction in enumerate(interactions):
            request, response = interaction["request"], interaction["response"]
            parts = urlsplit(request["uri"])
            if parts.path.startswith(DRIVE_FILES):
                self._drive(request, response, spreadsheet_ids)
                continue
            if parts.hostname != SHEETS_HOST:
                continue
            outcome = Outcome(
                path.stem,
                position,
                kind_of(request["method"], parts.path),
                request["method"],
                request["uri"],
            )
            self._ensure_stranger_spreadsheet(parts.path, response, spreadsheet_ids)
            status, body = self._send(request, parts, spreadsheet_ids, sheet_ids)
            expected = _json_or_text(response["body"]["string"])
            _learn_sheet_ids(expected, body, sheet_ids)
            if status != response["status"]["code"]:
                outcome.differences.append(f"status {status} != {response['status']['code']}")
            translated = _translate_back(body, spreadsheet_ids, sheet_ids)
            outcome.differences.extend(_compare(translated, expected, "$"))
            outcomes.append(outcome)
        return outcomes

    def _drive(
        self, request: dict[str, Any], response: dict[str, Any], ids: dict[str, str]
    ) -> None:
        method, path = request["method"], urlsplit(request["uri"]).path
        if method == "POST" and path == DRIVE_FILES:
            title = json.loads(request["body"])["name"]
            created = self._call("POST", "/v4/spreadsheets", {"properties": {"title": title}})[1]
            ids[json.loads(response["body"]["string"])["id"]] = created["spreadsheetId"]
        elif method == "DELETE":
            recorded = path.rsplit("/", 1)[1]
            if recorded in ids:
                self.admin.delete_spreadsheet(ids[recorded])

    def _ensure_stranger_spreadsheet(
        self, path: str, response: dict[str, Any], ids: dict[str, str]
    ) -> None:
        match = _SPREADSHEET_PATH.match(path)
        if match is None or match.group(1) in ids or response["status"]["code"] != 403:
            return
        spreadsheet_id, _ = self.admin.create_spreadsheet(STRANGER, "Someone else's")
        ids[match.group(1)] = spreadsheet_id

    def _send(
        self,
        request: dict[str, Any],
        parts: Any,
        spreadsheet_ids: dict[str, str],
        sheet_ids: dict[int, int],
    ) -> tuple[int, Any]:
        path = parts.path
        match = _SPREADSHEET_PATH.match(path)
        if match is not None and match.group(1) in spreadsheet_ids:
            path = path.replace(match.group(1), spreadsheet_ids[match.group(1)], 1)
        target = path + (f"?{parts.query}" if parts.query else "")
        body = request["body"]
        payload = None if not body else _map_sheet_ids(json.loads(body), sheet_ids)
        return self._call(request["method"], target, payload)

    def _call(self, method: str, target: str, payload: Any) -> tuple[int, Any]:
        headers = {"content-type": "application/json"} if payload is not None else {}
        data = None if payload is None else json.dumps(payload)
        response, content = self.http.request(
            self.base_url + target, method, body=data, headers=headers
        )
        return int(response.status), _json_or_text(content.decode("utf-8"))


def _json_or_text(text: str) -> Any:
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _map_sheet_ids(value: Any, sheet_ids: dict[int, int]) -> Any:
    """Recorded sheet ids in a request body, replaced by the emulator's."""
    if isinstance(value, list):
        return [_map_sheet_ids(item, sheet_ids) for item in value]
    if not isinstance(value, dict):
        return value
    return {
        key: sheet_ids.get(item, item)
        if key == "sheetId" and isinstance(item, int)
        else _map_sheet_ids(item, sheet_ids)
        for key, item in value.items()
    }


def _learn_sheet_ids(expected: Any, actual: Any, sheet_ids: dict[int, int]) -> None:
    """Pair the sheet ids of recorded and emulated addSheet replies."""
    if not isinstance(expected, dict) or not isinstance(actual, dict):
        return
    for recorded, emulated in zip(expected.get("replies", []), actual.get("replies", [])):
        if "addSheet" in recorded and "addSheet" in emulated:
            recorded_id = recorded["addSheet"]["properties"]["sheetId"]
            sheet_ids[recorded_id] = emulated["addSheet"]["properties"]["sheetId"]


def _translate_back(value: Any, spreadsheet_ids: dict[str, str], sheet_ids: dict[int, int]) -> Any:
    """The emulator's ids in an answer, replaced by the recorded ones."""
    back_sheets = {emulated: recorded for recorded, emulated in sheet_ids.items()}
    back_spreadsheets = {emulated: recorded for recorded, emulated in spreadsheet_ids.items()}

    def walk(item: Any, key: str | None = None) -> Any:
        if isinstance(item, list):
            return [walk(element) for element in item]
        if isinstance(item, dict):
            return {name: walk(element, name) for name, element in item.items()}
        if key == "sheetId" and isinstance(item, int):
            return back_sheets.get(item, item)
        if isinstance(item, str) and key == "spreadsheetId":
            return back_spreadsheets.get(item, item)
        return item

    return walk(value)


def _compare(actual: Any, expected: Any, where: str) -> list[str]:
    if isinstance(expected, dict) and isinstance(actual, dict):
        differences = []
        keys = (set(expected) | set(actual)) - IGNORED_KEYS
        for key in sorted(keys):
            if key not in actual:
                differences.append(f"{where}.{key} missing")
            elif key not in expected:
                differences.append(f"{where}.{key} not in Google's answer")
            else:
                differences.extend(_compare(actual[key], expected[key], f"{where}.{key}"))
        return differences
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{where}: {len(actual)} items != {len(expected)}"]
        differences = []
        for index, (item, wanted) in enumerate(zip(actual, expected)):
            differences.extend(_compare(item, wanted, f"{where}[{index}]"))
        return differences
    if type(actual) is not type(expected) or actual != expected:  # 1 and 1.0 read differently
        return [f"{where}: {actual!r} != {expected!r}"]
    return []
