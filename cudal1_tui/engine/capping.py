"""A cap on the reply the engine parses, gates and records (``Settings.max_reply_kb``).

A model stuck in a loop can send megabytes; everything after the cap is dropped before
parsing, and the record says so (``usage["reply_cut"]``, and the round's messages).
"""

from __future__ import annotations

from dataclasses import dataclass

CUT_FIX = "raise max_reply_kb (CUDAL1_MAX_REPLY_KB) if replies this long are expected"


@dataclass(frozen=True)
class CappedReply:
    content: str
    reasoning: str
    content_chars: int  # as received
    reasoning_chars: int
    limit_chars: int

    @property
    def cut(self) -> bool:
        return self.content_chars > self.limit_chars or self.reasoning_chars > self.limit_chars

    def usage(self) -> dict[str, dict[str, int]]:
        if not self.cut:
            return {}
        return {"reply_cut": {"content_chars": self.content_chars,
                              "reasoning_chars": self.reasoning_chars,
                              "kept_chars": self.limit_chars}}

    def note(self) -> str:
        longest = max(self.content_chars, self.reasoning_chars)
        return (f"the reply was {longest / 1024:,.0f} KB: cut to its first "
                f"{self.limit_chars // 1024} KB before parsing (recorded as cut)")


def cap_reply(content: str, reasoning: str, limit_kb: int) -> CappedReply:
    """Content and reasoning cut to ``limit_kb`` KB each (characters, not bytes)."""
    limit = max(1, limit_kb) * 1024
    return CappedReply(content[:limit], reasoning[:limit], len(content), len(reasoning), limit)
