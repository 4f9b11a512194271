"""N replicas of the bot behind nginx on this machine, for tests, benchmarks and demos (issue 24).

:class:`ReplicaSet` renders ``deploy/nginx.conf.j2`` into a temporary prefix, starts nginx on a
free loopback port, then ``python -m bot`` replicas in Telegram webhook mode and/or
``python -m bot --whatsapp`` replicas, each on its own port and all on one database, and waits
until each listens. Telegram's webhook URL is nginx's (every replica sets the same one), so
updates reach a replica through nginx; ``kill(i)`` SIGKILLs one, and nginx sends its share to
the others (``proxy_next_upstream``)::

    async with FakeTelegram() as tg, ReplicaSet(
            n_telegram=3, database_url=cluster.database_url("bot"), work_dir=tmp_path,
            env=replica_env(tg, index_dir)) as replicas:
        await tg.push_text(42, "How much does an Xbox 360 cost?")
        await replicas.kill(0)                      # SIGKILL, returns the exit status (-9)
        replicas.signal_all(signal.SIGSTOP)         # freeze every replica (SIGCONT resumes)
        replicas.pids, replicas.ports, replicas.telegram_webhook_url, replicas.logs()

The replicas are plain child processes of this one (``cwd`` = this checkout, ``PYTHONPATH``
set to it); their output goes to ``work_dir/<kind>-<i>.log`` and nginx's to
``work_dir/nginx/logs/``. Needs nginx on the ``PATH`` (or ``$NGINX``; ``apt-get install
nginx-light``).

Command line (``python -m standins.replicas --help``)::

    python -m standins.replicas render --telegram 127.0.0.1:8001,127.0.0.1:8002
    python -m standins.replicas up --telegram 3 --fake-telegram     # a throwaway PostgreSQL
    python -m standins.replicas up --telegram 0 --web 2             # the page on 2 replicas
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple, Self

import jinja2

from standins.postgres import free_port

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "deploy" / "nginx.conf.j2"
TELEGRAM_PATH = "/telegram"
WHATSAPP_PATH = "/whatsapp"
READY_TIMEOUT_S = 120.0  # loading the encoder and index, 3 replicas at once on 2 busy cores
STOP_TIMEOUT_S = 30.0  # SIGTERM, then SIGKILL

Kind = Literal["telegram", "whatsapp", "web"]
Balance = Literal["least_conn", "round_robin"]


class ReplicaError(RuntimeError):
    """A replica or nginx did not start; the message carries the tail of its log."""


class Memory(NamedTuple):
    """A process's memory in KiB from ``/proc/<pid>/smaps_rollup``: ``rss_kib`` counts shared
    pages (the memory-mapped index, libraries) once per process, ``pss_kib`` divides each by the
    number of processes mapping it, so PSS summed over replicas is what they take together."""

    rss_kib: int
    pss_kib: int


def memory_of(pid: int) -> Memory:
    """RSS and PSS of ``pid`` (Linux ≥ 4.14).

    Raises:
        OSError: no such process, or no ``smaps_rollup``.
    """
    values = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss"):
            values[key] = int(rest.split()[0])
    return Memory(values["Rss"], values["Pss"])


def find_nginx() -> str | None:
    """``$NGINX``, else ``nginx`` on the ``PATH``, else Debian's ``/usr/sbin/nginx`` (not on a
    non-root user's ``PATH``); None when not installed."""
    found = os.environ.get("NGINX") or shutil.which("nginx")
    return found or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").is_file() else None)


def render_nginx_conf(*, listen: str, telegram_servers: Sequence[str] = (),
                      whatsapp_servers: Sequence[str] = (), web_servers: Sequence[str] = (),
                      balance: Balance = "least_conn",
                      telegram_path: str = TELEGRAM_PATH, whatsapp_path: str = WHATSAPP_PATH,
                      user: str = "", ssl_certificate: str = "", ssl_certificate_key: str = "",
                      template: Path = TEMPLATE) -> str:
    """``deploy/nginx.conf.j2`` filled in (its header lists the fields).

    Raises:
        ValueError: no replica at all, an unknown ``balance``, or a certificate without its key.
    """
    if not telegram_servers and not whatsapp_servers and not web_servers:
        raise ValueError("no replicas: give at least one Telegram, WhatsApp or web server")
    if balance not in ("least_conn", "round_robin"):
        raise ValueError(f"balance {balance!r} is not one of least_conn, round_robin")
    if bool(ssl_certificate) != bool(ssl_certificate_key):
        raise ValueError("ssl_certificate and ssl_certificate_key go together")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, autoescape=False)
    return env.from_string(template.read_text()).render(
        listen=listen, telegram_servers=list(telegram_servers),
        whatsapp_servers=list(whatsapp_servers), web_servers=list(web_servers),
        balance=balance, telegram_path=telegram_path,
        whatsapp_path=whatsapp_path, user=user, ssl_certificate=ssl_certificate,
        ssl_certificate_key=ssl_certificate_key)


@dataclass
class Replica:
    """One ``python -m bot`` child: its kind, index among its kind, port and log."""

    kind: Kind
    index: int
    port: int
    log_path: Path
    process: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    @property
    def url(self) -> str:
        """The replica's own base URL, bypassing nginx."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def is_alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def signal(self, sig: int) -> None:
        """Send ``sig`` (SIGSTOP, SIGCONT, SIGKILL, ...) if the replica is running.

        ``os.kill``, not ``process.send_signal``: the latter polls the child first
        (``Popen.poll``), which reaps one that just died before asyncio's child watcher does,
        and the watcher then reports exit status 255 instead of ``-9``. Until the watcher has
        reaped it (``returncode`` set) the pid is still this child's, a zombie at worst.
        """
        if self.is_alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def log(self) -> str:
        """Everything the replica wrote (across restarts)."""
        if not self.log_path.is_file():
            return ""
        return self.log_path.read_text("utf-8", errors="replace")

    def memory(self) -> Memory:
        return memory_of(self.pid)

    def log_tail(self, n_chars: int = 3000) -> str:
        return self.log()[-n_chars:]


@dataclass
class ReplicaSet:
    """``n_telegram`` Telegram webhook replicas, ``n_whatsapp`` WhatsApp replicas and ``n_web``
    web page replicas on ``database_url`` (``BOT_DATABASE_URL``: ``postgresql://...``;
    ``sqlite:///file`` for one replica), behind one nginx on 127.0.0.1.

    Args:
        env: the replicas' environment, on top of which the harness sets ``PYTHONPATH``,
            ``BOT_DATABASE_URL``, ``TELEGRAM_WEBHOOK_*``, ``WHATSAPP_LISTEN``/``PORT``/
            ``WEBHOOK_PATH`` and ``BOT_WEB_HOST``/``PORT``/``TRUST_PROXY``. It must hold what
            the bot needs otherwise: ``TELEGRAM_TOKEN`` and ``TELEGRAM_API_BASE``/``FILE_BASE``
            (a stand-in), ``WHATSAPP_*`` credentials, ``VOICE_RAG_INDEX_DIR``,
            ``SARVAM_API_KEY``.
        work_dir: logs and nginx's prefix (``work_dir/nginx``); a temporary folder when None,
            deleted by ``stop()``.
        balance: nginx's choice of replica: ``least_conn`` or ``round_robin``.
        webhook_secret: ``TELEGRAM_WEBHOOK_SECRET``; a random one when empty. WhatsApp's
            shared secret (``WHATSAPP_APP_SECRET``, the HMAC key of the webhook signature) comes
            from ``env``, the same on every replica and the sender.
        inherit_bot_env: False drops this process's ``TELEGRAM_*``, ``WHATSAPP_*`` and
            ``BOT_*`` variables, so that only ``env`` and the harness set them (tests: a
            developer's ``BOT_ALLOWED_USER_IDS`` must not reach the replicas).
        code: the checkout the replicas run (``cwd`` and ``PYTHONPATH``).
    """

    n_telegram: int = 1
    n_whatsapp: int = 0
    n_web: int = 0
    database_url: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    work_dir: Path | None = None
    balance: Balance = "least_conn"
    webhook_secret: str = ""
    ready_timeout_s: float = READY_TIMEOUT_S
    code: Path = ROOT
    python: str = sys.executable
    inherit_bot_env: bool = True
    replicas: list[Replica] = field(default_factory=list, init=False)
    nginx_port: int = field(default=0, init=False)
    _nginx: asyncio.subprocess.Process | None = field(default=None, init=False)
    _is_temp_dir: bool = field(default=False, init=False)

    # ------------------------------------------------------------------ what tests read
    @property
    def url(self) -> str:
        """nginx's base URL."""
        return f"http://127.0.0.1:{self.nginx_port}"

    @property
    def telegram_webhook_url(self) -> str:
        return self.url + TELEGRAM_PATH

    @property
    def whatsapp_webhook_url(self) -> str:
        return self.url + WHATSAPP_PATH

    @property
    def telegram(self) -> list[Replica]:
        return self.of("telegram")

    @property
    def whatsapp(self) -> list[Replica]:
        return self.of("whatsapp")

    @property
    def web(self) -> list[Replica]:
        return self.of("web")

    def of(self, kind: Kind) -> list[Replica]:
        """The replicas of ``kind``, by index."""
        return [r for r in self.replicas if r.kind == kind]

    @property
    def pids(self) -> list[int]:
        return [r.pid for r in self.replicas]

    @property
    def ports(self) -> list[int]:
        return [r.port for r in self.replicas]

    def logs(self) -> str:
        """Every replica's log, one after another."""
        return "".join(r.log() for r in self.replicas)

    @property
    def nginx_pid(self) -> int:
        assert self._nginx is not None, "not started"
        return self._nginx.pid

    @property
    def nginx_dir(self) -> Path:
        assert self.work_dir is not None, "not started"
        return self.work_dir / "nginx"

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> Self:
        """Start nginx, then every replica at once; return when all listen.

        Raises:
            ReplicaError: nginx is missing or refused its config, or a replica exited or did
                not listen within ``ready_timeout_s`` (the message ends with its log).
        """
        if self.n_telegram + self.n_whatsapp + self.n_web < 1:
            raise ValueError("a ReplicaSet needs at least one replica")
        if self.work_dir is None:
            self.work_dir, self._is_temp_dir = Path(tempfile.mkdtemp(prefix="voice-rag-rs-")), True
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.webhook_secret = self.webhook_secret or secrets.token_urlsafe(16)
        kinds: list[Kind] = (["telegram"] * self.n_telegram + ["whatsapp"] * self.n_whatsapp
                             + ["web"] * self.n_web)
        counts = {"telegram": 0, "whatsapp": 0, "web": 0}
        for kind in kinds:
            self.replicas.append(Replica(kind, counts[kind], free_port(),
                                         self.work_dir / f"{kind}-{counts[kind]}.log"))
            counts[kind] += 1
        try:
            await self._start_nginx()
            for replica in self.replicas:
                await self._spawn(replica)
            await asyncio.gather(*(self.wait_ready(r) for r in self.replicas))
        except BaseException:
            await self.stop()
            raise
        return self

    def replica_env(self, replica: Replica) -> dict[str, str]:
        """The environment of ``replica``: ``env`` plus what the harness decides."""
        inherited = {k: v for k, v in os.environ.items() if self.inherit_bot_env
                     or not k.startswith(("TELEGRAM_", "WHATSAPP_", "BOT_"))}
        env = {**inherited, **self.env, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(self.code),
               "BOT_DATABASE_URL": self.database_url}
        if replica.kind == "telegram":
            env |= {"TELEGRAM_WEBHOOK_URL": self.telegram_webhook_url,
                    "TELEGRAM_WEBHOOK_SECRET": self.webhook_secret,
                    "TELEGRAM_WEBHOOK_LISTEN": "127.0.0.1",
                    "TELEGRAM_WEBHOOK_PORT": str(replica.port)}
        elif replica.kind == "whatsapp":
            env |= {"WHATSAPP_LISTEN": "127.0.0.1", "WHATSAPP_PORT": str(replica.port),
                    "WHATSAPP_WEBHOOK_PATH": WHATSAPP_PATH}
        else:  # the page; nginx's X-Forwarded-For names the client
            env |= {"BOT_WEB_HOST": "127.0.0.1", "BOT_WEB_PORT": str(replica.port),
                    "BOT_WEB_TRUST_PROXY": "1"}
        env.pop("PORT", None)
        return env

    async def _spawn(self, replica: Replica) -> None:
        args = ["-m", "bot"] + {"telegram": [], "whatsapp": ["--whatsapp"],
                                "web": ["--web"]}[replica.kind]
        with replica.log_path.open("ab") as log:
            replica.process = await asyncio.create_subprocess_exec(
                self.python, *args, cwd=self.code, env=self.replica_env(replica),
                stdout=log, stderr=log, start_new_session=True)

    async def wait_ready(self, replica: Replica) -> None:
        """Until ``replica`` accepts connections (both front ends listen only once the index,
        encoder and database are open).

        Raises:
            ReplicaError: it exited, or did not listen within ``ready_timeout_s``.
        """
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            if not replica.is_alive:
                raise ReplicaError(f"{replica.kind} replica {replica.index} exited with "
                                   f"{replica.process.returncode if replica.process else None}"
                                   f"; {replica.log_path}:\n{replica.log_tail()}")
            with contextlib.suppress(OSError):
                _reader, writer = await asyncio.open_connection("127.0.0.1", replica.port)
                writer.close()
                return
            if time.monotonic() > deadline:
                raise ReplicaError(f"{replica.kind} replica {replica.index} not listening on "
                                   f"port {replica.port} after {self.ready_timeout_s:.0f} s; "
                                   f"{replica.log_path}:\n{replica.log_tail()}")
            await asyncio.sleep(0.1)

    async def _start_nginx(self) -> None:
        nginx = find_nginx()
        if nginx is None:
            raise ReplicaError("nginx not found: apt-get install nginx-light (or set $NGINX)")
        prefix = self.nginx_dir
        for sub in ("logs", "temp"):
            (prefix / sub).mkdir(parents=True, exist_ok=True)
        self.nginx_port = free_port()
        conf = render_nginx_conf(
            listen=f"127.0.0.1:{self.nginx_port}", balance=self.balance,
            telegram_servers=[f"127.0.0.1:{r.port}" for r in self.telegram],
            whatsapp_servers=[f"127.0.0.1:{r.port}" for r in self.whatsapp],
            web_servers=[f"127.0.0.1:{r.port}" for r in self.web],
            user=pwd.getpwuid(os.geteuid()).pw_name if os.geteuid() == 0 else "")
        (prefix / "nginx.conf").write_text(conf)
        command = [nginx, "-p", str(prefix), "-e", str(prefix / "logs" / "error.log"),
                   "-c", str(prefix / "nginx.conf")]
        check = subprocess.run([*command, "-t", "-q"], capture_output=True, text=True)
        if check.returncode != 0:
            raise ReplicaError(f"nginx refused {prefix / 'nginx.conf'}: {check.stderr.strip()}")
        self._nginx = await asyncio.create_subprocess_exec(
            *command, "-g", "daemon off;", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError):
                _reader, writer = await asyncio.open_connection("127.0.0.1", self.nginx_port)
                writer.close()
                return
            log = prefix / "logs" / "error.log"
            if self._nginx.returncode is not None or time.monotonic() > deadline:
                raise ReplicaError(f"nginx did not listen on {self.nginx_port}: "
                                   f"{log.read_text(errors='replace')[-2000:]}")
            await asyncio.sleep(0.05)

    def _replica(self, which: int | Replica) -> Replica:
        return which if isinstance(which, Replica) else self.replicas[which]

    async def kill(self, which: int | Replica) -> int:
        """SIGKILL a replica (``replicas[which]``: Telegram ones first, then WhatsApp, then web);
        its exit status (``-9``)."""
        replica = self._replica(which)
        assert replica.process is not None, "not started"
        replica.signal(signal.SIGKILL)
        return await replica.process.wait()

    def signal_all(self, sig: int) -> None:
        """Send ``sig`` to every running replica (``SIGSTOP`` freezes them all at one moment,
        ``SIGCONT`` lets them go on)."""
        for replica in self.replicas:
            replica.signal(sig)

    async def restart(self, which: int | Replica) -> Replica:
        """Start a stopped or killed replica again on its port; return once it listens."""
        replica = self._replica(which)
        if replica.is_alive:
            raise ValueError(f"{replica.kind} replica {replica.index} is still running")
        await self._spawn(replica)
        await self.wait_ready(replica)
        return replica

    async def stop(self) -> None:
        """SIGTERM every replica (after SIGCONT, in case one is stopped; SIGKILL after
        ``STOP_TIMEOUT_S``), then nginx; a temporary ``work_dir`` is deleted."""
        for replica in self.replicas:
            replica.signal(signal.SIGCONT)
            replica.signal(signal.SIGTERM)
        for replica in self.replicas:
            if replica.process is not None:
                try:
                    await asyncio.wait_for(replica.process.wait(), STOP_TIMEOUT_S)
                except TimeoutError:
                    await self.kill(replica)
        if self._nginx is not None and self._nginx.returncode is None:
            self._nginx.send_signal(signal.SIGQUIT)  # graceful: finish proxied requests
            try:
                await asyncio.wait_for(self._nginx.wait(), 10)
            except TimeoutError:
                self._nginx.kill()
                await self._nginx.wait()
        if self._is_temp_dir and self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


# ---------------------------------------------------------------------- command line
def _render(args: argparse.Namespace) -> int:
    try:
        print(render_nginx_conf(
            listen=args.listen, telegram_servers=_servers(args.telegram),
            whatsapp_servers=_servers(args.whatsapp), web_servers=_servers(args.web),
            balance=args.balance,
            telegram_path=args.telegram_path, whatsapp_path=args.whatsapp_path, user=args.user,
            ssl_certificate=args.ssl_certificate, ssl_certificate_key=args.ssl_certificate_key),
            end="")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _servers(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


async def _up(args: argparse.Namespace) -> int:
    from standins.postgres import ThrowawayCluster
    from standins.telegram import FakeTelegram

    async with contextlib.AsyncExitStack() as stack:
        url = args.database_url or os.environ.get("BOT_DATABASE_URL", "")
        if not url:
            cluster = ThrowawayCluster.start()
            stack.callback(cluster.stop)
            url = cluster.url
            print(f"postgresql: {url} (throwaway, deleted at exit)", flush=True)
        env: dict[str, str] = {}
        if args.fake_telegram:
            tg = await stack.enter_async_context(FakeTelegram(control_api=True))
            env |= {"TELEGRAM_TOKEN": tg.token, "TELEGRAM_API_BASE": tg.base_url,
                    "TELEGRAM_FILE_BASE": tg.base_file_url,
                    "SARVAM_API_KEY": os.environ.get("SARVAM_API_KEY", "unused")}
            print(f"fake telegram: {tg.url}/_control/ (push_text, wait)", flush=True)
        work_dir = Path(args.work_dir) if args.work_dir else None
        replicas = await stack.enter_async_context(ReplicaSet(
            n_telegram=args.telegram, n_whatsapp=args.whatsapp, n_web=args.web,
            database_url=url, env=env,
            work_dir=work_dir, balance=args.balance))
        print(f"nginx pid={replicas.nginx_pid} {replicas.url} "
              f"(conf and logs in {replicas.nginx_dir})", flush=True)
        for r in replicas.replicas:
            print(f"{r.kind} replica {r.index}: pid={r.pid} {r.url} log={r.log_path}",
                  flush=True)
        print("Ctrl-C stops them all", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m standins.replicas", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    render = sub.add_parser("render", help="print deploy/nginx.conf.j2 filled in")
    render.add_argument("--listen", default="127.0.0.1:8080",
                        help="nginx's listen directive (default %(default)s; '443 ssl')")
    render.add_argument("--telegram", default="", help="host:port,... of Telegram replicas")
    render.add_argument("--whatsapp", default="", help="host:port,... of WhatsApp replicas")
    render.add_argument("--web", default="", help="host:port,... of web page replicas")
    render.add_argument("--telegram-path", default=TELEGRAM_PATH)
    render.add_argument("--whatsapp-path", default=WHATSAPP_PATH)
    render.add_argument("--user", default="", help="nginx's user directive (master as root)")
    render.add_argument("--ssl-certificate", default="")
    render.add_argument("--ssl-certificate-key", default="")
    render.add_argument("--balance", choices=("least_conn", "round_robin"), default="least_conn")
    up = sub.add_parser("up", help="run replicas behind nginx here until Ctrl-C")
    up.add_argument("--telegram", type=int, default=2, help="Telegram webhook replicas")
    up.add_argument("--whatsapp", type=int, default=0, help="WhatsApp webhook replicas")
    up.add_argument("--web", type=int, default=0, help="web page replicas (nginx's /)")
    up.add_argument("--database-url", default="",
                    help="BOT_DATABASE_URL (default: $BOT_DATABASE_URL, else a throwaway "
                         "PostgreSQL cluster)")
    up.add_argument("--fake-telegram", action="store_true",
                    help="start the Bot API stand-in (standins.telegram, control API on)")
    up.add_argument("--work-dir", default="", help="logs and nginx prefix (default: temporary)")
    up.add_argument("--balance", choices=("least_conn", "round_robin"), default="least_conn")
    args = parser.parse_args(argv)
    if args.command == "render":
        return _render(args)
    try:
        return asyncio.run(_up(args))
    except ReplicaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
