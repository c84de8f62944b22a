"""A JSON text read in chunks, one value at a time: how a large Rally report is read.

Rally's report of 200,000 iterations is hundreds of megabytes of JSON; the
reader (verdicts/results.py) walks it member by member and decodes one
iteration at a time, so memory holds a chunk, not the tree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, TextIO

from rally_keystone_bench.errors import BenchError


class JsonStream:
    """A JSON text read in chunks; values are decoded one at a time."""

    CHUNK = 1 << 20

    def __init__(self, f: TextIO, name: str) -> None:
        self.f = f
        self.name = name
        self.buf = ""
        self.pos = 0
        self.offset = 0  # characters dropped before buf
        self.eof = False
        self.decoder = json.JSONDecoder()
        self._ws = re.compile(r"\S")

    def _fill(self) -> bool:
        try:
            chunk = self.f.read(self.CHUNK)
        except UnicodeDecodeError:
            raise BenchError(f"{self.name}: not UTF-8 text, not a Rally JSON report") from None
        if not chunk:
            self.eof = True
            return False
        self.offset += self.pos
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        return True

    def truncated(self) -> BenchError:
        return BenchError(
            f"{self.name}: truncated JSON (ends after {self.offset + len(self.buf)} characters)"
        )

    def peek(self) -> str:
        while True:
            m = self._ws.search(self.buf, self.pos)
            if m:
                self.pos = m.start()
                return self.buf[self.pos]
            self.pos = len(self.buf)
            if not self._fill():
                return ""

    def expect(self, chars: str) -> str:
        c = self.peek()
        if c == "":
            raise self.truncated()
        if c not in chars:
            raise BenchError(
                f"{self.name}: invalid JSON at character {self.offset + self.pos}: "
                f"expected {' or '.join(repr(x) for x in chars)}"
            )
        self.pos += 1
        return c

    def value(self) -> Any:
        if self.peek() == "":
            raise self.truncated()
        while True:
            try:
                obj, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                near_end = e.pos >= len(self.buf) - 16 or e.msg.startswith("Unterminated")
                if near_end and not self.eof and self._fill():
                    continue
                if near_end:
                    raise self.truncated() from None
                raise BenchError(
                    f"{self.name}: invalid JSON at character {self.offset + e.pos}: {e.msg}"
                ) from None
            if len(self.buf) - end < 64 and not self.eof and self._fill():
                # A number cut by the chunk's end ("0." of "0.25") decodes as a
                # shorter number: decide only with more text after it.
                continue
            self.pos = end
            return obj

    def members(self) -> Iterator[str]:
        """Keys of the object that starts here; the caller reads each value."""
        self.expect("{")
        if self.peek() == "}":
            self.pos += 1
            return
        while True:
            key = self.value()
            if not isinstance(key, str):
                raise BenchError(f"{self.name}: invalid JSON: an object key is not a string")
            self.expect(":")
            yield key
            if self.expect(",}") == "}":
                return

    def items(self) -> Iterator[None]:
        """Elements of the array that starts here; the caller reads each one."""
        self.expect("[")
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            yield None
            if self.expect(",]") == "]":
                return
