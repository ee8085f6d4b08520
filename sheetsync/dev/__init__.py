"""Development tools: the Sheets API emulator, the demo, seed data and a local stack.

Nothing in the production path imports this package (the CLI's `emulator` and `demo`
commands aside, which import it when they run).
"""
