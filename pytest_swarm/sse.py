"""An incremental Server-Sent Events splitter for the token path.

Hand-written rather than taken from a library because it sits on the hottest path
of the harness: one call per network read, no per-line objects, and the common
event (`data: {...}` on one line) costs one slice.
"""

from __future__ import annotations


class SSESplitter:
    """Feeds raw bytes in any split and yields the `data` payload of each complete event."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data payloads of the events that `chunk` completes (possibly none)."""
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")
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
                payload = _slow_event(block)
                if payload is not None:
                    payloads.append(payload)
        return payloads

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet terminated: a truncated stream leaves them here."""
        return self._buffer


def _slow_event(block: bytes) -> bytes | None:
    """Multi-line events, comments and `data:` without a space, per the SSE spec."""
    data_lines = []
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            data_lines.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(data_lines) if data_lines else None
