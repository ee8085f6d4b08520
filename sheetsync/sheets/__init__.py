"""The Sheets API client, its HTTP transport and the rate limiter in front of it."""
