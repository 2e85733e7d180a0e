"""The byte stream of a Kineto trace: the file's bytes (gzip or plain) read a chunk at a time.

:class:`_Stream` gives the text the one-event-at-a-time engine (:mod:`.parse_slow`) and the document
walk (:mod:`.document`) decode JSON values from, across refills; the window scheduler
(:mod:`.windows`) takes the bytes not yet read as text and hands back what it leaves. Read errors
(a truncated or damaged gzip stream, an unreadable file) become the reader's refusals here.
"""
from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from json import JSONDecodeError
from pathlib import Path

from ...errors import CorruptFileError, InputError
from ...formats import GZIP_MAGIC, _head
from .errors import NotJsonError, TruncatedTraceError
from .numbers import _big_int

#: Characters read per refill of the stream.
CHUNK_CHARS = 1 << 20
#: The largest single JSON value (one event, or one metadata value) accepted.
MAX_VALUE_CHARS = 256 << 20

_WS = re.compile(r"[ \t\n\r]*")
_AFTER = re.compile(r"[ \t\n\r]*([,\]])")
_AFTER_KEY = re.compile(r"[ \t\n\r]*([,}])")
_COLON = re.compile(r"[ \t\n\r]*:[ \t\n\r]*")


class _Stream:
    """Buffered text over the file, with helpers to decode whole JSON values across refills.

    ``fh`` is the file's bytes (``gzip.open(..., "rb")`` for ``.gz``), decoded here as
    ``io.TextIOWrapper(fh, encoding="utf-8-sig", errors="replace", newline="")`` would: the same
    text, ``more(size)`` giving what its ``read(size)`` gives. The fast path (:func:`_events`) takes
    the bytes not yet read as text (:meth:`take_bytes`) and hands back what it leaves (:meth:`give_bytes`)."""

    def __init__(self, fh, path: Path) -> None:
        self.fh = fh
        self.path = path
        self.buf = ""
        self.pos = 0
        self.offset = 0  # characters consumed before ``buf``
        self.eof = False
        self._dec = codecs.getincrementaldecoder("utf-8-sig")("replace")
        self._text = ""  # decoded, not yet in ``buf``
        self.in_trace = False  # inside traceEvents: errors are damage, not "not JSON"
        self._fast = json.JSONDecoder(parse_float=str).raw_decode
        self._slow = json.JSONDecoder(parse_float=str, parse_int=_big_int).raw_decode

    def decode(self, buf: str, pos: int):
        """``raw_decode`` (floats as their text); an integer too long for Python's int-from-text
        limit (a ValueError that is not a syntax error) is decoded again keeping it as text."""
        try:
            return self._fast(buf, pos)
        except JSONDecodeError:
            raise
        except ValueError:
            return self._slow(buf, pos)

    def more(self, grow: bool = False, size: int = CHUNK_CHARS) -> bool:
        """Read the next chunk (``size`` characters). ``grow``: the value at ``pos`` is incomplete,
        so read at least as much again as is pending: a long value is then decoded O(log n) times,
        not once per chunk (a 200 MB string re-scanned on every 1 MB refill took quadratic time)."""
        if self.eof:
            return False
        size = max(size, len(self.buf) - self.pos) if grow else size
        while len(self._text) < size:
            data = self.read_bytes(max(size - len(self._text), 1 << 16))
            self._text += self._dec.decode(data, not data)
            if not data:
                break
        chunk, self._text = (self._text[:size], self._text[size:]) if len(self._text) > size else (self._text, "")
        if not chunk:
            self.eof = True
            return False
        self.offset += self.pos
        self.buf = self.buf[self.pos:] + chunk if self.pos < len(self.buf) else chunk
        self.pos = 0
        return True

    def read_bytes(self, size: int) -> bytes:
        """Up to ``size`` bytes of the file (b"" at its end), read errors as refusals."""
        try:
            return self.fh.read(size)
        except EOFError:
            raise TruncatedTraceError(f"{self.path}: truncated gzip file: the compressed data ends before the trace does",
                                      hint="the file was cut while being written or copied; profile or copy it again") from None
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise CorruptFileError(f"{self.path}: damaged gzip file ({str(exc)[:100]})",
                                   hint="decompress it with gunzip to see how much is readable") from None
        except OSError as exc:
            raise InputError(f"{self.path}: cannot read ({exc.strerror or exc})") from None

    def take_bytes(self) -> bytes:
        """The rest of the file's text from ``pos`` as UTF-8, and the bytes not yet decoded (the
        next :meth:`read_bytes` goes on after them); ``offset`` counts the characters before them."""
        rest = self.buf[self.pos:] + self._text
        pending = self._dec.getstate()[0]
        self.offset += self.pos
        self.buf, self.pos, self._text = "", 0, ""
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")  # past the start: no BOM
        return rest.encode("utf-8") + pending if rest else pending

    def give_bytes(self, data) -> None:
        """Read the bytes ``data`` (the file's, from character ``offset`` on) as text again."""
        self._dec.reset()
        self.buf, self.pos, self._text = self._dec.decode(data), 0, ""
        self.eof = False

    def peek(self) -> str:
        """The next non-blank character ("" at the end of the file)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def value(self):
        """Decode the JSON value at the current position (refilling the buffer as needed)."""
        self.peek()
        while True:
            try:
                obj, end = self.decode(self.buf, self.pos)
            except JSONDecodeError as exc:
                if self._incomplete(exc) and self.more(grow=True):
                    continue
                self.fail(exc)
            except RecursionError:
                raise CorruptFileError(f"{self.path}: JSON nested too deeply to be a trace") from None
            if end >= len(self.buf) and not isinstance(obj, (dict, list, str)) and self.more():
                continue  # a number (or literal) at the end of the buffer may go on
            self.pos = end
            return obj

    def _incomplete(self, exc: JSONDecodeError) -> bool:
        if len(self.buf) - self.pos > MAX_VALUE_CHARS:
            raise CorruptFileError(f"{self.path}: a JSON value longer than {MAX_VALUE_CHARS >> 20} M characters: "
                                   "not a trace nsysdoc can read")
        return exc.pos >= len(self.buf) - 8 or exc.msg.startswith("Unterminated string")

    def fail(self, exc: JSONDecodeError | None = None, what: str = "", truncated: bool | None = None):
        """Raise the one-line refusal for a syntax error at the current position."""
        if truncated is None:
            truncated = self.eof and exc is not None and self._incomplete(exc)
        if truncated:
            raise TruncatedTraceError(f"{self.path}: truncated JSON: the file ends inside the trace",
                                      hint="the trace was cut while being written or copied; profile again")
        why = exc.msg if exc is not None else what
        where = self.offset + (exc.pos if exc is not None else self.pos)
        if self.in_trace:
            raise CorruptFileError(f"{self.path}: damaged trace JSON ({why} at character {where:,})")
        raise NotJsonError(f"{self.path}: not JSON ({why} at character {where:,}), so not a PyTorch "
                           "Profiler trace", hint="pass a torch.profiler trace (*.pt.trace.json[.gz]) or an nsys export")


def _open_bytes(path: Path):
    head = _head(path, 4)
    if head.startswith(GZIP_MAGIC):
        return gzip.open(path, "rb")
    return open(path, "rb")
