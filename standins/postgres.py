"""A throwaway PostgreSQL cluster for tests, benchmarks and the replica harness: ``initdb`` into a
temporary folder, ``postgres`` on 127.0.0.1 at a free port (and a Unix socket in that folder),
stopped and deleted afterwards. ``tests.pgcluster`` re-exports it for the tests.

Uses Debian's server binaries (``/usr/lib/postgresql/<version>/bin``, from ``apt-get install
postgresql``; ``.ci/run`` installs them), or those in ``$PG_BIN``, or ``initdb`` on the ``PATH``.
``initdb`` refuses to run as root, so as root the cluster runs as the ``postgres`` user (created
by Debian's package) through ``runuser``. Durability is off (``fsync``, ``synchronous_commit``,
``full_page_writes``): a test cluster trades crash safety for speed.

    cluster = ThrowawayCluster.start()       # ~1-2 s: initdb + start
    url = cluster.create_database("t1")      # postgresql://postgres@127.0.0.1:<port>/t1
    cluster.stop()
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SERVER_USER = "postgres"  # Debian's package creates it; the cluster's owner when run as root


def find_bindir() -> Path | None:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``, or None when not installed."""
    candidates = [os.environ.get("PG_BIN", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                         key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0,
                         reverse=True)
    on_path = shutil.which("initdb")
    candidates.append(str(Path(on_path).parent) if on_path else "")
    for folder in filter(None, candidates):
        if all((Path(folder) / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return Path(folder)
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now (the OS picks it; another process may take it later)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class ThrowawayCluster:
    """A running test cluster; ``url`` reaches its ``postgres`` database as superuser
    ``postgres`` (trust authentication: no password)."""

    bindir: Path
    datadir: Path
    port: int
    run_as: str | None

    @property
    def url(self) -> str:
        return self.database_url("postgres")

    def database_url(self, name: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    @classmethod
    def start(cls, bindir: Path | None = None) -> ThrowawayCluster:
        """initdb and start; RuntimeError with the server's output when either fails, or when
        run as root without a ``postgres`` user."""
        bindir = bindir or find_bindir()
        if bindir is None:
            raise RuntimeError("PostgreSQL server binaries not found: apt-get install postgresql")
        run_as = None
        root = Path(tempfile.mkdtemp(prefix="voice-rag-pg-"))
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam(SERVER_USER)
            except KeyError as exc:
                shutil.rmtree(root)
                raise RuntimeError(f"running as root and there is no {SERVER_USER!r} user for "
                                   "initdb (apt-get install postgresql creates it)") from exc
            os.chown(root, owner.pw_uid, owner.pw_gid)
            run_as = SERVER_USER
        cluster = cls(bindir, root / "data", free_port(), run_as)
        try:
            cluster._run("initdb", "-D", str(cluster.datadir), "-U", "postgres", "-A", "trust",
                         "-E", "UTF8", "--locale=C", "--no-sync")
            options = (f"-c listen_addresses=127.0.0.1 -p {cluster.port} "
                       f"-c unix_socket_directories={root} -c fsync=off "
                       "-c synchronous_commit=off -c full_page_writes=off "
                       "-c shared_buffers=32MB -c max_connections=200")
            cluster._run("pg_ctl", "-D", str(cluster.datadir), "-o", options, "-l",
                         str(root / "server.log"), "-w", "-t", "60", "start")
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bindir / tool), *args]
        if self.run_as:
            cmd = ["runuser", "-u", self.run_as, "--", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd="/")
        if proc.returncode != 0:
            log = self.datadir.parent / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            raise RuntimeError(f"{tool} failed ({proc.returncode}): {proc.stderr.strip()} "
                               f"{proc.stdout.strip()[-1000:]} {tail}")

    def create_database(self, name: str) -> str:
        """Create an empty database ``name`` (letters, digits, ``_``); returns its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    def restart(self) -> None:
        """Stop the server (``-m fast``: sessions are ended, committed work is flushed) and
        start it again on the same port and options; returns once it accepts connections."""
        self._run("pg_ctl", "-D", str(self.datadir), "-l", str(self.datadir.parent / "server.log"),
                  "-m", "fast", "-w", "-t", "60", "restart")

    def stop(self) -> None:
        """Stop the server at once (no checkpoint) and delete its folder."""
        if (self.datadir / "postmaster.pid").is_file():
            try:
                self._run("pg_ctl", "-D", str(self.datadir), "-m", "immediate", "-w", "stop")
            except RuntimeError:
                pass
        shutil.rmtree(self.datadir.parent, ignore_errors=True)

