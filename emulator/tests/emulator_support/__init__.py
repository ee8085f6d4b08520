"""Helpers for the emulator's tests (fixtures live in ``conftest.py``).

- ``emulator_support.google``      google-api-python-client and google-auth against it
- ``emulator_support.gspread``     gspread against it, changed only in the endpoint
- ``emulator_support.recordings``  the replay of recordings of the real Sheets API
"""
