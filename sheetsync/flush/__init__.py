"""The flush: hydrate a buffer's answers into rows and write them to the sheet, once."""
