"""A throwaway PostgreSQL server for the store tests: initdb into a temporary directory, run as a
non-root user on a random port, removed at the end. :func:`find_bindir` says where the server
binaries are (``None``: the PostgreSQL tests skip, saying so)."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

SKIP_REASON = ("no PostgreSQL server binaries (initdb, postgres) found in PATH, $ACP_TEST_PG_BINDIR or "
               "/usr/lib/postgresql/*/bin: install the postgresql package to run the PostgreSQL store tests")


def find_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``postgres``, or ``None``."""
    candidates = [os.environ.get("ACP_TEST_PG_BINDIR", "")]
    which = shutil.which("initdb")
    if which:
        candidates.append(os.path.dirname(which))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for candidate in candidates:
        if candidate and os.access(os.path.join(candidate, "initdb"), os.X_OK) and \
                os.access(os.path.join(candidate, "postgres"), os.X_OK):
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_user() -> str | None:
    """The user the server runs as: PostgreSQL refuses root, so as root use ``postgres`` or ``nobody``."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise RuntimeError("running as root and no unprivileged user (postgres, nobody) to run PostgreSQL as")


@contextlib.contextmanager
def throwaway_server(bindir: Path) -> Iterator[str]:
    """Start a server; yield the conninfo of its ``postgres`` database; stop it and remove its files."""
    base = Path(tempfile.mkdtemp(prefix="acp-agent-pg-"))
    user = _server_user()
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(base, entry.pw_uid, entry.pw_gid)
    data = base / "data"
    port = _free_port()
    log = open(base / "server.log", "wb")  # noqa: SIM115 - open for the server's lifetime
    process: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                        "--no-sync"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, user=user,
                       cwd=base)
        process = subprocess.Popen(
            [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(base),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200"],
            stdout=log, stderr=log, user=user, cwd=base)
        conninfo = f"host=127.0.0.1 port={port} user=postgres dbname=postgres connect_timeout=5"
        _wait_ready(conninfo, process, base / "server.log")
        yield conninfo
    finally:
        if process is not None:
            process.send_signal(signal.SIGINT)  # fast shutdown
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()
        shutil.rmtree(base, ignore_errors=True)


def _wait_ready(conninfo: str, process: subprocess.Popen[bytes], log: Path) -> None:
    import psycopg

    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"PostgreSQL exited with {process.returncode}:\n{log.read_text(errors='replace')}")
        try:
            psycopg.connect(conninfo).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def fresh_database(conninfo: str, name: str) -> str:
    """Create the empty database ``name`` on the server; its conninfo."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as db:
        db.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    return conninfo.replace("dbname=postgres", f"dbname={name}")


class RestartableServer:
    """A throwaway server whose process can be restarted on the same data and port (`restartable_server`)."""

    def __init__(self, bindir: Path, base: Path, user: str | None) -> None:
        self.bindir, self.base, self.user = bindir, base, user
        self.port = _free_port()
        self.conninfo = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres connect_timeout=5"
        """The conninfo of its ``postgres`` database (the same across restarts)."""
        self.process: subprocess.Popen[bytes] | None = None
        self._log = open(base / "server.log", "ab")  # noqa: SIM115 - open for the server's lifetime

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self.process = subprocess.Popen(
            [str(self.bindir / "postgres"), "-D", str(self.base / "data"), "-p", str(self.port), "-k", str(self.base),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200"],
            stdout=self._log, stderr=self._log, user=self.user, cwd=self.base)
        _wait_ready(self.conninfo, self.process, self.base / "server.log")

    def stop(self) -> None:
        """Stop the server at once (``immediate`` shutdown: every connection is cut, as in a crash)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restart(self) -> None:
        """Stop the server (every connection and advisory lock gone) and start it again."""
        self.stop()
        self.start()


@contextlib.contextmanager
def restartable_server(bindir: Path) -> Iterator[RestartableServer]:
    """A throwaway server the test may restart; stopped and removed at the end."""
    base = Path(tempfile.mkdtemp(prefix="acp-agent-pg-"))
    user = _server_user()
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(base, entry.pw_uid, entry.pw_gid)
    subprocess.run([str(bindir / "initdb"), "-D", str(base / "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                    "--no-sync"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, user=user, cwd=base)
    server = RestartableServer(bindir, base, user)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        server._log.close()
        shutil.rmtree(base, ignore_errors=True)
