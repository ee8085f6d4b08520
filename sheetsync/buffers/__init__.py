"""Buffers: one Redis list per linked sheet, its job, and the Lua scripts that move them."""
