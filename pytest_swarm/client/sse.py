r"""An incremental Server-Sent Events splitter for the token path: hand-written, as the hottest path."""

from __future__ import annotations

import re

_LINE_END = re.compile(rb"\r\n|\n|\r")


class SSESplitter:
    """Feeds raw bytes in any split and yields the `data` payload of each complete event."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data payloads of the events that `chunk` completes (possibly none)."""
        if (
            not self._buffer
            and chunk.startswith(b"data: ")
            and chunk.endswith(b"\n\n")
            and chunk.find(b"\n") == len(chunk) - 2
            and b"\r" not in chunk
        ):
            return [chunk[6:-2]]  # the common read: one single-line event, nothing buffered
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            payloads, self._buffer = _split_any_line_ends(buffer)
            return payloads
        end = buffer.rfind(b"\n\n")
        if end < 0:
            self._buffer = buffer
            return []
        self._buffer = buffer[end + 2 :]
        payloads = []
        for block in buffer[:end].split(b"\n\n"):
            if block.startswith(b"data: ") and b"\n" not in block:
                payloads.append(block[6:])
            elif block:
                payload = _data_of(block.split(b"\n"))
                if payload is not None:
                    payloads.append(payload)
        return payloads

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet terminated: a truncated stream leaves them here."""
        return self._buffer


def _split_any_line_ends(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Events of a buffer whose lines may end in CRLF, LF or CR; returns (payloads, rest).

    A CR at the very end may be the first half of a CRLF, so it waits for the next read.
    """
    payloads: list[bytes] = []
    lines: list[bytes] = []
    start = consumed = 0
    for match in _LINE_END.finditer(buffer):
        if match.end() == len(buffer) and match.group() == b"\r":
            break
        line = buffer[start : match.start()]
        start = match.end()
        if line:
            lines.append(line)
            continue
        payload = _data_of(lines)
        lines = []
        consumed = start
        if payload is not None:
            payloads.append(payload)
    return payloads, buffer[consumed:]


def _data_of(lines: list[bytes]) -> bytes | None:
    """The joined `data` lines of one event (comments and other fields ignored), per the SSE spec."""
    data_lines = []
    for line in lines:
        if line.startswith(b"data:"):
            value = line[5:]
            data_lines.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(data_lines) if data_lines else None
