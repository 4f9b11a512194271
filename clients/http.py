"""Shared lifecycle of the async HTTP clients of remote services (speech-to-text, LLM)."""

from __future__ import annotations

from typing import Self

import httpx


class ServiceClient:
    """Owns one ``httpx.AsyncClient`` (base URL, timeout in seconds, headers); use as an async
    context manager or call :meth:`aclose`. ``transport`` is for tests and custom networking."""

    def __init__(
        self,
        base_url: str,
        timeout_s: float,
        headers: dict[str, str],
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=httpx.Timeout(timeout_s),
            headers=headers,
            transport=transport,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()
