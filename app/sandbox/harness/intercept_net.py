"""Network fakes for capture: connecting succeeds to nothing, HTTP answers 200 with `{}`, no packet leaves.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library.
CI scripts poll the servers they started (health endpoints, a port to open) before they launch training.
Here every connect succeeds without touching the network, and names resolve to loopback without DNS, so the
script moves on to the launch the capture is after. Sockets the script did not connect keep their real
behaviour (asyncio's own socketpair, for one).
"""

from __future__ import annotations

import email.message
import io
import socket
import urllib.request
import weakref
from typing import Any

HTTP_METHODS = (b"GET ", b"POST ", b"PUT ", b"HEAD ", b"PATCH ", b"DELETE ", b"OPTIONS ")
HTTP_OK = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
           b"Connection: close\r\n\r\n{}")

# Bytes each fake-connected socket will still return from recv (an HTTP answer once a request was sent).
_pending: weakref.WeakKeyDictionary[socket.socket, bytearray] = weakref.WeakKeyDictionary()
_real = {name: getattr(socket.socket, name) for name in ("connect", "connect_ex", "recv", "recv_into",
                                                         "recvfrom", "send", "sendall", "sendto")}


def install() -> None:
    """Fake connections for every socket of this process and answer urllib.request.urlopen with 200."""
    fakes: dict[str, Any] = {"connect": _connect, "connect_ex": _connect_ex, "recv": _recv,
                             "recv_into": _recv_into, "recvfrom": _recvfrom, "send": _send,
                             "sendall": _sendall, "sendto": _sendto}
    for name, fake in fakes.items():
        setattr(socket.socket, name, fake)
    socket.getaddrinfo = _getaddrinfo
    socket.gethostbyname = _gethostbyname
    urllib.request.urlopen = _urlopen


def _connect(self: socket.socket, address: Any) -> None:
    _pending.setdefault(self, bytearray())


def _connect_ex(self: socket.socket, address: Any) -> int:
    _connect(self, address)
    return 0


def _take(self: socket.socket, size: int) -> bytes:
    buffer = _pending[self]
    size = len(buffer) if size <= 0 else size
    chunk = bytes(buffer[:size])
    del buffer[:size]
    return chunk


def _recv(self: socket.socket, size: int, flags: int = 0) -> bytes:
    if self not in _pending:
        return bytes(_real["recv"](self, size, flags))
    return _take(self, size)


def _recv_into(self: socket.socket, target: Any, size: int = 0, flags: int = 0) -> int:
    if self not in _pending:
        return int(_real["recv_into"](self, target, size, flags))
    view = memoryview(target).cast("B")
    chunk = _take(self, min(size or len(view), len(view)))
    view[: len(chunk)] = chunk
    return len(chunk)


def _recvfrom(self: socket.socket, size: int, flags: int = 0) -> tuple[bytes, Any]:
    if self not in _pending:
        return _real["recvfrom"](self, size, flags)
    return _take(self, size), ("127.0.0.1", 0)


def _send(self: socket.socket, data: Any, flags: int = 0) -> int:
    if self not in _pending:
        return int(_real["send"](self, data, flags))
    payload = bytes(data)
    if payload.startswith(HTTP_METHODS):
        _pending[self][:] = HTTP_OK
    return len(payload)


def _sendall(self: socket.socket, data: Any, flags: int = 0) -> None:
    if self not in _pending:
        _real["sendall"](self, data, flags)
        return
    _send(self, data, flags)


def _sendto(self: socket.socket, data: Any, *rest: Any) -> int:
    # Datagrams are never sent anywhere: a connectionless socket has no peer to fake.
    return len(bytes(data))


def _getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,
                 flags: int = 0) -> list[tuple[Any, ...]]:
    number = int(port) if isinstance(port, int) or (isinstance(port, str) and port.isdigit()) else 0
    kind = type or socket.SOCK_STREAM
    return [(socket.AF_INET, kind, 6 if kind == socket.SOCK_STREAM else 17, "", ("127.0.0.1", number))]


def _gethostbyname(host: str) -> str:
    return "127.0.0.1"


class _Response(io.BytesIO):
    """An HTTP 200 answer with a JSON body `{}`, shaped like what urlopen returns."""

    def __init__(self, url: str) -> None:
        super().__init__(b"{}")
        self.url = url
        self.status = self.code = 200
        self.reason = "OK"
        self.headers = self.msg = email.message.Message()
        self.headers["Content-Type"] = "application/json"
        self.headers["Content-Length"] = "2"

    def getcode(self) -> int:
        return self.status

    def geturl(self) -> str:
        return self.url

    def info(self) -> email.message.Message:
        return self.headers

    def getheader(self, name: str, default: Any = None) -> Any:
        return self.headers.get(name, default)

    def getheaders(self) -> list[tuple[str, str]]:
        return list(self.headers.items())


def _urlopen(url: Any, data: Any = None, timeout: Any = None, **options: Any) -> _Response:
    return _Response(url if isinstance(url, str) else getattr(url, "full_url", str(url)))
