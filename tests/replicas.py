"""A minimal replica launcher for the tests: N ``python -m bot`` (Telegram, webhook mode) and N
``python -m bot --whatsapp`` processes on one database, behind Debian's nginx, all from a
temporary folder.

nginx runs unprivileged-style from that folder (``nginx -p <dir> -c <dir>/nginx.conf -g
'daemon off;'``: pid, logs and temp paths inside it) on a free loopback port, and spreads
requests round-robin: ``/telegram`` over the Telegram replicas, ``/webhook`` over the WhatsApp
ones. A replica that refuses connections (killed) is skipped for the next one
(``proxy_next_upstream error``: the request never reached it, so a POST may go elsewhere);
one that dies while answering gives the sender a 502, and the sender redelivers.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 180.0  # six processes loading the encoder and index on a busy 2-core box
WA_SECRET = "replica-test-secret"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).is_file()), None)


NGINX_CONF = """\
{user}worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log {dir}/access.log;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream telegram {{
{telegram}
    }}
    upstream whatsapp {{
{whatsapp}
    }}
    server {{
        listen 127.0.0.1:{port};
        proxy_connect_timeout 2s;
        proxy_read_timeout 30s;
        proxy_next_upstream error timeout;
        location /telegram {{ proxy_pass http://telegram; }}
        location /webhook {{ proxy_pass http://whatsapp; }}
    }}
}}
"""


@dataclass
class Replica:
    kind: str  # "telegram" or "whatsapp"
    port: int
    log_path: Path
    proc: asyncio.subprocess.Process | None = None

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(sig)


@dataclass
class ReplicaSet:
    """``n`` replicas of each kind in ``folder``; :meth:`start`, then :meth:`stop`."""

    folder: Path
    env: dict[str, str]
    n: int = 3
    kinds: tuple[str, ...] = ("telegram", "whatsapp")
    port: int = field(default_factory=free_port)
    replicas: list[Replica] = field(default_factory=list)
    nginx: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def of(self, kind: str) -> list[Replica]:
        return [r for r in self.replicas if r.kind == kind]

    async def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        for kind in self.kinds:
            for i in range(self.n):
                self.replicas.append(Replica(kind, free_port(), self.folder / f"{kind}-{i}.log"))
        self._start_nginx()
        for replica in self.replicas:
            await self._spawn(replica)
        await self.wait_ready()

    def _start_nginx(self) -> None:
        binary = nginx_binary()
        assert binary is not None, "nginx is not installed: apt-get install nginx-light"
        servers = {kind: "\n".join(f"        server 127.0.0.1:{r.port};"
                                   for r in self.of(kind)) or "        server 127.0.0.1:9;"
                   for kind in ("telegram", "whatsapp")}
        conf = self.folder / "nginx.conf"
        conf.write_text(NGINX_CONF.format(
            user="user root;\n" if os.geteuid() == 0 else "", dir=self.folder, port=self.port,
            telegram=servers["telegram"], whatsapp=servers["whatsapp"]))
        self.nginx = subprocess.Popen(
            [binary, "-p", str(self.folder), "-c", str(conf), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=(self.folder / "nginx.out").open("wb"))

    async def _spawn(self, replica: Replica) -> None:
        env = dict(self.env)
        args = [sys.executable, "-m", "bot"]
        if replica.kind == "telegram":
            env |= {"TELEGRAM_WEBHOOK_URL": f"{self.url}/telegram",
                    "TELEGRAM_WEBHOOK_LISTEN": "127.0.0.1",
                    "TELEGRAM_WEBHOOK_PORT": str(replica.port)}
        else:
            args.append("--whatsapp")
            env |= {"WHATSAPP_LISTEN": "127.0.0.1", "WHATSAPP_PORT": str(replica.port)}
        with replica.log_path.open("ab") as log:
            replica.proc = await asyncio.create_subprocess_exec(
                *args, cwd=ROOT, env=env, stdout=log, stderr=log)

    async def wait_ready(self) -> None:
        """Every replica accepts connections (the WhatsApp ones answer /healthz)."""
        deadline = asyncio.get_running_loop().time() + READY_TIMEOUT_S
        async with httpx.AsyncClient() as client:
            for replica in self.replicas:
                while True:
                    assert replica.proc is not None
                    if replica.proc.returncode is not None:
                        raise AssertionError(f"{replica.kind} replica exited:\n"
                                             + replica.log_path.read_text()[-3000:])
                    try:
                        if replica.kind == "whatsapp":
                            response = await client.get(
                                f"http://127.0.0.1:{replica.port}/healthz")
                            if response.status_code == 200:
                                break
                        else:
                            _, writer = await asyncio.open_connection("127.0.0.1", replica.port)
                            writer.close()
                            break
                    except (OSError, httpx.HTTPError):
                        pass
                    if asyncio.get_running_loop().time() > deadline:
                        raise AssertionError(f"{replica.kind} replica not ready:\n"
                                             + replica.log_path.read_text()[-3000:])
                    await asyncio.sleep(0.1)

    def signal_all(self, sig: int) -> None:
        for replica in self.replicas:
            replica.signal(sig)

    async def stop(self) -> None:
        for replica in self.replicas:
            replica.signal(signal.SIGCONT)
            replica.signal(signal.SIGTERM)
        for replica in self.replicas:
            if replica.proc is not None and replica.proc.returncode is None:
                try:
                    await asyncio.wait_for(replica.proc.wait(), 30)
                except TimeoutError:
                    replica.proc.kill()
                    await replica.proc.wait()
        if self.nginx is not None:
            self.nginx.terminate()
            try:
                self.nginx.wait(10)
            except subprocess.TimeoutExpired:
                self.nginx.kill()
                self.nginx.wait()

    def logs(self) -> str:
        return "".join(r.log_path.read_text("utf-8", errors="replace") for r in self.replicas)
