"""Lua scripts on Redis: one Python<->Lua contract per script, and the shared prelude."""
