"""sheetsync: stream form submissions into Google Sheets."""
