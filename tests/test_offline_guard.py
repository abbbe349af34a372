"""The offline guarantee: outbound connections really are blocked in the tests and in the kernels.

Only TEST-NET-1 (192.0.2.0/24, RFC 5737) is aimed at: it is reserved for documentation and
routes nowhere, so even a broken guard sends nothing to a real host.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import network_guard
import pytest
from makefile_env import run_make
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = ROOT / "tests" / "offline"
TEST_NET = "192.0.2.1"  # RFC 5737: never routed


def test_guard_is_installed_in_this_test_session():
    assert network_guard.installed()


def test_connection_to_a_non_loopback_address_fails_at_once():
    started = time.perf_counter()
    with pytest.raises(network_guard.NetworkBlockedError, match=re.escape(TEST_NET)):
        socket.create_connection((TEST_NET, 80), timeout=5)
    assert time.perf_counter() - started < 1.0, "blocked connections must fail fast, not time out"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        assert sock.connect_ex((TEST_NET, 443)) != 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        with pytest.raises(network_guard.NetworkBlockedError):
            sock.sendto(b"x", (TEST_NET, 53))
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
        with pytest.raises(network_guard.NetworkBlockedError):
            sock.connect(("2001:db8::1", 80, 0, 0))  # RFC 3849 documentation prefix


def test_blocked_error_is_an_oserror_that_libraries_already_handle():
    assert issubclass(network_guard.NetworkBlockedError, ConnectionError)
    assert issubclass(network_guard.NameLookupBlockedError, socket.gaierror)


def test_name_lookups_are_blocked_but_local_names_resolve():
    with pytest.raises(socket.gaierror, match="example.invalid"):
        socket.getaddrinfo("example.invalid", 443)
    with pytest.raises(socket.gaierror):
        socket.gethostbyname("example.invalid")
    assert socket.getaddrinfo("localhost", 80)
    assert socket.getaddrinfo("127.0.0.1", 80)
    assert socket.getaddrinfo(TEST_NET, 80)  # numeric: no lookup; connect is what is blocked


def test_loopback_and_local_sockets_stay_allowed():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            peer, _ = server.accept()
            with peer:
                client.sendall(b"ping")
                assert peer.recv(4) == b"ping"
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"ok")
        assert right.recv(2) == b"ok"


@pytest.mark.parametrize(
    "host, allowed",
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("10.0.0.1", False),
        ("192.0.2.1", False),
        ("::ffff:192.0.2.1", False),
        ("0.0.0.0", False),
        ("example.invalid", False),
    ],
)
def test_is_loopback(host, allowed):
    assert network_guard.is_loopback(host) is allowed


@pytest.mark.tooling  # a fresh process: make test-tooling (CI)
def test_a_fresh_python_with_the_makefile_pythonpath_is_guarded():
    """What `make test` and `make course` do for the kernels: sitecustomize installs the guard."""
    code = (
        "import socket\n"
        f"try:\n    socket.create_connection(({TEST_NET!r}, 80), timeout=5)\n"
        "except OSError as error:\n    print(type(error).__name__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(OFFLINE)}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "NetworkBlockedError", result.stderr


def test_the_makefile_runs_tests_and_notebooks_with_the_guard():
    dry_run = run_make("-n", "-o", ".venv/.installed", "test", "course", timeout=60)
    assert dry_run.returncode == 0, dry_run.stderr
    guards = (f"PYTHONPATH={OFFLINE}", f'PYTHONPATH="{OFFLINE}')  # the path may be quoted
    commands = [line for line in dry_run.stdout.splitlines() if "-m pytest" in line]
    commands += [line for line in dry_run.stdout.splitlines() if "nbconvert --to notebook" in line]
    assert len(commands) == 4, dry_run.stdout  # tests, notebooks, make course: English, Chinese
    for command in commands:
        assert any(guard in command for guard in guards), command


@pytest.mark.tooling  # a fresh kernel: make test-tooling (CI)
def test_a_jupyter_kernel_started_like_nbval_does_is_guarded_and_still_talks_over_loopback(
    monkeypatch,
):
    """The kernel runs with the guard (PYTHONPATH is inherited), and the client reaches it."""
    monkeypatch.setenv("PYTHONPATH", str(OFFLINE))
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "import socket\n"
            f"try:\n    socket.create_connection(({TEST_NET!r}, 80), timeout=5)\n"
            "except OSError as error:\n    print(type(error).__name__)"
        )
    ]
    NotebookClient(notebook, kernel_name="python3", timeout=120).execute()
    assert notebook.cells[0].outputs[0]["text"] == "NetworkBlockedError\n"
