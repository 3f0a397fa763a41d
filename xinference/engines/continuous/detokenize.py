"""Turning a growing list of generated token ids into text, a few tokens at a time.

Decoding the whole generated sequence after every token costs ``1 + 2 + ... + n`` token decodes for ``n`` tokens:
a 4,000-token answer decodes eight million tokens. :class:`IncrementalDecoder` decodes only a small window instead:
the tokens that arrived since the last text it gave out, plus the tokens of that previous piece as left context.
The context is decoded on its own too, and the new text is what the window adds to it, because a token's text
can depend on its neighbour (SentencePiece drops the leading space of a window's first word, so both decodes drop
it alike). Each token therefore takes part in a few small decodes (about three; more while a character's bytes arrive,
bounded by :data:`MAX_PENDING`), whatever the length of the answer.

A window whose text ends in U+FFFD stops at an incomplete UTF-8 character (byte-level BPE splits an emoji or a CJK
character into byte tokens): nothing is given out until the next tokens complete it, or the sequence ends, or
:data:`MAX_PENDING` tokens have not completed it (then the replacement character is real output, as a one-shot
decode would show it). ``clean_up_tokenization_spaces`` is off: that clean-up rewrites text next to later tokens,
which text already sent cannot follow.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["MAX_PENDING", "IncrementalDecoder"]

#: Tokens held back for one incomplete character at the most (UTF-8 needs 4 bytes; byte tokens carry one each).
MAX_PENDING = 6


class IncrementalDecoder:
    """The detokenization state of one sequence; call :meth:`step` after each token with the whole id list.

    Used on the decode loop's thread only. ``decoded_tokens`` counts the ids passed to the tokenizer (tests check
    that it grows linearly with the output)."""

    __slots__ = ("_context", "_read", "decoded_tokens", "skip_special")

    def __init__(self, *, skip_special: bool = True) -> None:
        self._context = 0  # first id of the left context
        self._read = 0  # ids before this one are text already given out
        self.skip_special = skip_special
        self.decoded_tokens = 0

    def _decode(self, tokenizer: Any, ids: list[int]) -> str:
        self.decoded_tokens += len(ids)
        text: str = tokenizer.decode(ids, skip_special_tokens=self.skip_special, clean_up_tokenization_spaces=False)
        return text

    def step(self, tokenizer: Any, ids: list[int], *, final: bool = False) -> str:
        """The text the ids after the last call add ("" while a character is incomplete and ``final`` is False)."""
        if self._read >= len(ids):
            return ""
        window = self._decode(tokenizer, ids[self._context :])
        if window.endswith("\ufffd") and not final and len(ids) - self._read < MAX_PENDING:
            return ""
        context = self._decode(tokenizer, ids[self._context : self._read]) if self._read > self._context else ""
        if window.startswith(context):
            new = window[len(context) :]
        else:  # the tokenizer rewrote the context next to the new ids: keep what was sent, add the rest
            new = window[len(os.path.commonprefix([context, window])) :]
        self._context, self._read = self._read, len(ids)
        return new
