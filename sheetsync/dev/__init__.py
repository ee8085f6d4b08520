"""Development tools on the Sheets API emulator (the sheetsync-emulator distribution, in
``emulator/``): the demo, seed data and a local stack.

Nothing in the production path imports this package or the emulator (the CLI's
`emulator` and `demo` commands aside, which import them when they run).
"""
