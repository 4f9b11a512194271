"""The lifecycle shared by every stand-in: an aiohttp app listening on loopback."""

from __future__ import annotations

import asyncio
import signal
from typing import Self

from aiohttp import web


class LoopbackServer:
    """An aiohttp application on ``host:port`` (port 0: any free port, read back after start).

    Subclasses build the app in :meth:`make_app`; use ``async with`` or :meth:`start` /
    :meth:`stop`. Handlers are cancelled when a client drops its request
    (``handler_cancellation=True``), so a parked long poll never delays shutdown.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self._runner: web.AppRunner | None = None

    def make_app(self) -> web.Application:
        raise NotImplementedError

    @property
    def url(self) -> str:
        """``http://host:port``."""
        if self._runner is None:
            raise RuntimeError(f"{type(self).__name__} is not started: use 'async with'")
        return f"http://{self.host}:{self.port}"

    async def start(self) -> Self:
        """Listen on ``host:port``; afterwards ``self.port`` is the real port."""
        self._runner = web.AppRunner(self.make_app(), handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def run_until_signal(self) -> None:
        """Serve until SIGINT or SIGTERM (the stand-ins' standalone mode)."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
