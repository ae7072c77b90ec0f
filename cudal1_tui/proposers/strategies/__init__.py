"""One module per built-in strategy; each offers ``candidates(ctx) -> list[BuiltinCandidate]``."""
