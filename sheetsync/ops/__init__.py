"""Operations: the command line, status figures and process heartbeats."""
