"""Block outbound network access in this Python process; loopback and local sockets stay allowed.

The course promises that nothing is downloaded at run time. The test suite proves it by
running with this guard: pytest installs it in ``tests/conftest.py``, and every Python
process started with this folder on ``PYTHONPATH`` (the notebook kernels of ``make test``
and ``make course``) installs it from ``sitecustomize.py`` before any user code runs.

What it blocks: ``connect``/``connect_ex``/``sendto`` on an internet socket whose address
is not a loopback address, and name lookups (``getaddrinfo``, ``gethostbyname``) of any
host other than ``localhost``, this machine's own name or a numeric address. What it
allows: 127.0.0.0/8, ::1, Unix-domain sockets, socket pairs, and binding/listening, so a
Jupyter kernel can still talk to its client over 127.0.0.1 TCP.

It patches Python's ``socket`` module, so it covers everything that opens connections
through Python (urllib, requests, tiktoken's downloader, pip). It does not see
connections made from C code that bypasses Python's socket module.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

_INTERNET_FAMILIES = {socket.AF_INET, socket.AF_INET6}
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
_original: dict[str, object] = {}


class NetworkBlockedError(ConnectionRefusedError):
    """Raised instead of opening a connection to a non-loopback address."""


class NameLookupBlockedError(socket.gaierror):
    """Raised instead of resolving a host name through DNS."""


def is_loopback(host: object) -> bool:
    """True for ``localhost`` and for loopback addresses (127.0.0.0/8, ::1, ::ffff:127.x)."""
    if not isinstance(host, str):
        return False
    name = host.split("%", 1)[0].strip("[]").lower()  # drop an IPv6 zone id and brackets
    if name in _LOCAL_NAMES:
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or bool(mapped and mapped.is_loopback)


def _is_numeric(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0].strip("[]"))
    except ValueError:
        return False
    return True


def _allowed(sock: socket.socket, address: object) -> bool:
    if sock.family not in _INTERNET_FAMILIES:
        return True  # Unix-domain, netlink, ...: never leave the machine
    host = address[0] if isinstance(address, tuple) and address else address
    return is_loopback(host)


def _blocked_message(address: object) -> str:
    return (
        f"outbound network access to {address!r} is blocked: the course must run offline "
        "(only loopback addresses such as 127.0.0.1 are allowed; see tests/offline/)"
    )


def _guarded_connect(self: socket.socket, address, *args):
    if not _allowed(self, address):
        raise NetworkBlockedError(errno.ECONNREFUSED, _blocked_message(address))
    return _original["connect"](self, address, *args)


def _guarded_connect_ex(self: socket.socket, address, *args):
    if not _allowed(self, address):
        return errno.ECONNREFUSED  # connect_ex reports errors as a return value
    return _original["connect_ex"](self, address, *args)


def _guarded_sendto(self: socket.socket, data, *args):
    address = args[-1] if args else None  # sendto(data, address) or sendto(data, flags, address)
    if not _allowed(self, address):
        raise NetworkBlockedError(errno.ECONNREFUSED, _blocked_message(address))
    return _original["sendto"](self, data, *args)


def _lookup_allowed(host: object) -> bool:
    if host is None or host == "" or isinstance(host, bytes) and not host:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    return is_loopback(host) or _is_numeric(host) or host.lower() == socket.gethostname().lower()


def _check_lookup(host) -> None:
    if not _lookup_allowed(host):
        raise NameLookupBlockedError(socket.EAI_NONAME, f"name lookup of {host!r} is blocked")


def _guarded_getaddrinfo(host, *args, **kwargs):
    _check_lookup(host)
    return _original["getaddrinfo"](host, *args, **kwargs)


def _guarded_gethostbyname(host):
    _check_lookup(host)
    return _original["gethostbyname"](host)


def _guarded_gethostbyname_ex(host):
    _check_lookup(host)
    return _original["gethostbyname_ex"](host)


_METHODS = {
    "connect": _guarded_connect,
    "connect_ex": _guarded_connect_ex,
    "sendto": _guarded_sendto,
}
_FUNCTIONS = {
    "getaddrinfo": _guarded_getaddrinfo,
    "gethostbyname": _guarded_gethostbyname,
    "gethostbyname_ex": _guarded_gethostbyname_ex,
}


def install() -> None:
    """Patch the socket module. Idempotent."""
    if _original:
        return
    for name, guard in _METHODS.items():
        _original[name] = getattr(socket.socket, name)
        setattr(socket.socket, name, guard)
    for name, guard in _FUNCTIONS.items():
        _original[name] = getattr(socket, name)
        setattr(socket, name, guard)


def uninstall() -> None:
    """Undo :func:`install`."""
    for name in _METHODS:
        if name in _original:
            setattr(socket.socket, name, _original[name])
    for name in _FUNCTIONS:
        if name in _original:
            setattr(socket, name, _original[name])
    _original.clear()


def installed() -> bool:
    """True while the guard is in place."""
    return socket.socket.connect is _guarded_connect
