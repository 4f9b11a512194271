"""The WhatsApp Cloud API calls the WhatsApp front end makes, over httpx: send a text message,
look up a media id, download the media with the bearer token (size-limited), upload a voice
note and send it.

Faults (Graph's ``{"error": {"message", "code", …}}``) become :class:`GraphError` with a
``kind``:

- ``unauthorized`` (401, or code 190: token expired/revoked) and ``forbidden`` (403, or code 10
  / 200: permission) are not retried: a new token is needed;
- ``rate_limited`` (429, or codes 4, 80007, 130429, 131048, 131056) and ``server_error`` (5xx,
  timeouts, connection errors) are retried up to ``max_attempts`` calls in all, waiting the
  server's ``Retry-After`` seconds when it sends one, else ``backoff_base_s * 2**n``, each wait
  capped at ``max_backoff_s``;
- ``window_closed`` (code 131047: a free-form reply more than 24 hours after the user's last
  message) and ``bad_request`` (other 4xx) are not retried: the API will refuse again;
- ``bad_response``: a 200 that is not a JSON object, or a media lookup without a ``url``; not
  retried (a send may have gone out);
- ``media_expired`` (the download URL answered 404/410: it lives for 5 minutes) and
  ``too_big`` (over ``max_bytes`` by the lookup's ``file_size``, ``Content-Length`` or the
  bytes received) end a download.

Codes: Meta's "Error codes" page of the Cloud API documentation (developers.facebook.com/docs/
whatsapp/cloud-api/support/error-codes).
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any

import httpx

from bot.errors import BotError

log = logging.getLogger(__name__)

RATE_LIMIT_CODES = frozenset({4, 80007, 130429, 131048, 131056})
"""Graph codes of throttling: app/account rate limits, throughput, spam rate, pair rate."""
WINDOW_CLOSED_CODE = 131047
"""A free-form message outside the 24-hour customer-service window."""
MEDIA_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,256}")
"""A media id as a path segment: Meta's are digits; anything else (an absolute URL, ``../``)
would send the bearer token to another host or path, so it is refused before any request."""


class GraphError(BotError):
    """A Graph API call that failed for good: ``kind`` (see the module docstring), ``status``
    (HTTP, 0 for network errors), Graph ``code`` (None if absent), ``n_attempts`` calls made."""

    def __init__(self, kind: str, detail: str, *, status: int = 0, code: int | None = None,
                 n_attempts: int = 1) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind, self.status, self.code, self.n_attempts = kind, status, code, n_attempts


@dataclass(frozen=True, slots=True)
class Media:
    """A media lookup's answer: the short-lived download ``url``, ``mime_type`` and
    ``file_size`` in bytes (None when not given)."""

    url: str
    mime_type: str
    file_size: int | None


class GraphClient:
    """One phone number's Cloud API client; ``base_url`` is ``https://graph.facebook.com`` or a
    stand-in, ``version`` e.g. ``v21.0``. Close with :meth:`aclose`."""

    def __init__(self, *, token: str, phone_number_id: str, base_url: str, version: str,
                 timeout_s: float = 20.0, max_attempts: int = 4, backoff_base_s: float = 1.0,
                 max_backoff_s: float = 60.0) -> None:
        self.phone_number_id = phone_number_id
        self.max_attempts, self.backoff_base_s = max(1, max_attempts), backoff_base_s
        self.max_backoff_s = max_backoff_s
        self._http = httpx.AsyncClient(
            base_url=f"{base_url.rstrip('/')}/{version}/",
            headers={"Authorization": f"Bearer {token}"}, timeout=timeout_s)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send_text(self, to: str, body: str) -> str:
        """Send ``body`` (≤ 4,096 characters, WhatsApp formatting) to ``to`` (a wa_id); the
        sent message's id (``wamid.…``).

        Raises:
            GraphError: the message was not accepted (after retries where they make sense).
        """
        payload = {"messaging_product": "whatsapp", "recipient_type": "individual", "to": to,
                   "type": "text", "text": {"preview_url": False, "body": body}}
        answer = await self._call("POST", f"{self.phone_number_id}/messages", json=payload)
        return str(answer["messages"][0]["id"])

    async def upload_audio(self, data: bytes, mime_type: str = "audio/ogg") -> str:
        """Upload ``data`` (an OGG/Opus voice note: WhatsApp shows OGG with the Opus codec as
        a voice message) with ``POST /{phone-number-id}/media``; the media id."""
        answer = await self._call(
            "POST", f"{self.phone_number_id}/media",
            data={"messaging_product": "whatsapp", "type": mime_type},
            files={"file": ("voice.ogg", data, mime_type)})
        return str(answer["id"])

    async def send_audio(self, to: str, media_id: str) -> str:
        """Send uploaded audio ``media_id`` to ``to``; the sent message's id."""
        payload = {"messaging_product": "whatsapp", "recipient_type": "individual", "to": to,
                   "type": "audio", "audio": {"id": media_id}}
        answer = await self._call("POST", f"{self.phone_number_id}/messages", json=payload)
        return str(answer["messages"][0]["id"])

    async def media(self, media_id: str) -> Media:
        """Look up ``media_id`` (from a webhook's ``audio.id``).

        Raises:
            GraphError: ``bad_request`` for an id that is not one (see ``MEDIA_ID_RE``), with
                no request made; as for any call otherwise.
        """
        if not MEDIA_ID_RE.fullmatch(media_id):
            raise GraphError("bad_request", f"not a media id: {media_id[:80]!r}")
        answer = await self._call("GET", media_id)
        url, size = answer.get("url"), answer.get("file_size")
        if not isinstance(url, str) or not url:
            raise GraphError("bad_response", f"media lookup without a url: {str(answer)[:200]}",
                             status=200)
        return Media(url, str(answer.get("mime_type", "")),
                     int(size) if isinstance(size, int | str) and str(size).isdigit() else None)

    async def download(self, media: Media, max_bytes: int) -> bytes:
        """The media's bytes, fetched from ``media.url`` with the bearer token.

        Raises:
            GraphError: ``too_big`` over ``max_bytes``; ``media_expired`` on 404/410; others as
                for any call (one attempt: a fresh URL needs a fresh lookup).
        """
        if media.file_size is not None and media.file_size > max_bytes:
            raise GraphError("too_big", f"{media.file_size} bytes over {max_bytes}")
        try:
            async with self._http.stream("GET", media.url) as response:
                if response.status_code in (404, 410):
                    raise GraphError("media_expired", f"download URL answered "
                                     f"{response.status_code}", status=response.status_code)
                if response.status_code != 200:
                    await response.aread()
                    raise _error_of(response, 1)
                length = response.headers.get("Content-Length")
                if length is not None and int(length) > max_bytes:
                    raise GraphError("too_big", f"Content-Length {length} over {max_bytes}")
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > max_bytes:
                        raise GraphError("too_big", f"more than {max_bytes} bytes received")
                return bytes(data)
        except httpx.HTTPError as exc:
            raise GraphError("server_error", f"download failed: {exc!r}") from exc

    async def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """One Graph call with the retry policy of the module docstring."""
        for attempt in range(1, self.max_attempts + 1):
            retry_after_s: float | None = None
            try:
                response = await self._http.request(method, path, **kwargs)
            except httpx.HTTPError as exc:
                error = GraphError("server_error", f"{type(exc).__name__}: {exc}",
                                   n_attempts=attempt)
            else:
                if response.status_code == 200:
                    try:
                        answer = response.json()
                    except ValueError:
                        answer = None
                    if isinstance(answer, dict):
                        return answer
                    raise GraphError("bad_response", f"200 but not a JSON object: "
                                     f"{response.text[:200]!r}", status=200, n_attempts=attempt)
                error = _error_of(response, attempt)
                retry_after_s = _retry_after_s(response)
            if error.kind not in ("rate_limited", "server_error") or attempt == self.max_attempts:
                raise error
            wait_s = retry_after_s if retry_after_s is not None \
                else self.backoff_base_s * 2 ** (attempt - 1)
            wait_s = min(wait_s, self.max_backoff_s)
            log.info("graph_retry method=%s path=%s kind=%s status=%d code=%s attempt=%d "
                     "wait_s=%.2f", method, path.split("/")[-1], error.kind, error.status,
                     error.code, attempt, wait_s)
            await asyncio.sleep(wait_s)
        raise AssertionError("unreachable")


def _retry_after_s(response: httpx.Response) -> float | None:
    """The ``Retry-After`` header in seconds (numeric form only), else None."""
    try:
        return max(0.0, float(response.headers["Retry-After"]))
    except (KeyError, ValueError):
        return None


def _error_of(response: httpx.Response, attempt: int) -> GraphError:
    """The :class:`GraphError` of a non-200 Graph answer."""
    status = response.status_code
    try:
        error = response.json().get("error") or {}
    except ValueError:
        error = {}
    code = error.get("code") if isinstance(error.get("code"), int) else None
    detail = f"{status} code={code} {str(error.get('message') or response.text)[:200]}"
    if code == WINDOW_CLOSED_CODE:
        kind = "window_closed"
    elif status == 429 or code in RATE_LIMIT_CODES:
        kind = "rate_limited"
    elif status == 401 or code == 190:
        kind = "unauthorized"
    elif status == 403 or code in (10, 200):
        kind = "forbidden"
    elif status >= 500:
        kind = "server_error"
    else:
        kind = "bad_request"
    return GraphError(kind, detail, status=status, code=code, n_attempts=attempt)
