"""A loopback TCP relay to a Cassandra node that spoils frame checksums on connect.

Example:
    with ChecksumBreakingProxy(("127.0.0.1", 9042), breaking={1}) as proxy:
        cluster = Cluster([("127.0.0.1", proxy.port)])
        cluster.connect()   # NoHostAvailable: CRC mismatch on header ...
        proxy.broken        # 1

Everything is relayed byte for byte, except on the connections named in
``breaking``, counted from 1 in the order they start native protocol v5 (the
driver's control connection first, then each session's pool): there, the first
bit of the checksum of the first segment the node sends after ``READY`` is
flipped, which the DataStax driver rejects exactly as it does in its known
fault on connect ("CRC mismatch on header ...").
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Container
from types import TracebackType

__all__ = ["ChecksumBreakingProxy"]

_HEADER = 9  # an unsegmented frame's header: version, flags, stream, opcode, length
_READY = 0x02
_V5 = 5
_SEGMENT_HEADER = 6  # 3 bytes of length and flags, 3 of CRC24


class ChecksumBreakingProxy:
    """Relay connections on a loopback port to ``target``, spoiling the first
    segment's checksum on the v5 connections numbered in ``breaking``."""

    def __init__(self, target: tuple[str, int], breaking: Container[int]) -> None:
        self.target = target
        self.breaking = breaking
        self.started = 0
        self.broken = 0
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> ChecksumBreakingProxy:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._listener.close()
        with self._lock:
            for one in self._sockets:
                _close(one)

    def _take_break(self) -> bool:
        with self._lock:
            self.started += 1
            if self.started not in self.breaking:
                return False
            self.broken += 1
            return True

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(
                target=self._relay, args=(client, server, False), daemon=True
            ).start()
            threading.Thread(
                target=self._relay, args=(server, client, True), daemon=True
            ).start()

    def _relay(self, source: socket.socket, sink: socket.socket, node: bool) -> None:
        """Copy ``source`` to ``sink``; from the node, frame by frame until
        ``READY`` starts v5 segments, spoiling the first one if it is to break."""
        pending = b""
        segmented = not node
        breaking = False
        try:
            while data := source.recv(65536):
                if segmented and not breaking:
                    sink.sendall(data)
                    continue
                pending += data
                while not segmented and len(pending) >= _HEADER:
                    end = _HEADER + int.from_bytes(pending[5:_HEADER], "big")
                    if len(pending) < end:
                        break
                    frame, pending = pending[:end], pending[end:]
                    sink.sendall(frame)
                    if frame[0] & 0x7F == _V5 and frame[4] == _READY:
                        segmented, breaking = True, self._take_break()
                if breaking and len(pending) >= _SEGMENT_HEADER:
                    pending = pending[:3] + bytes([pending[3] ^ 0x01]) + pending[4:]
                    breaking = False
                if segmented and not breaking and pending:
                    sink.sendall(pending)
                    pending = b""
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)


def _close(one: socket.socket) -> None:
    with contextlib.suppress(OSError):
        one.shutdown(socket.SHUT_RDWR)
    one.close()
