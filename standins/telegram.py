"""A fake Telegram Bot API server on 127.0.0.1, driven by the real python-telegram-bot library.

Point PTB at it with ``ApplicationBuilder().base_url(fake.base_url).base_file_url(
fake.base_file_url)``. It speaks real HTTP (aiohttp) with the Bot API's wire format: every call is
a POST whose body is form-encoded, multipart (uploads) or JSON; answers are
``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code", "description", "parameters"}``.

Semantics kept from Telegram because bots depend on them:

- ``getUpdates`` long-polls for up to ``timeout`` seconds (``timeout=0`` answers at once, which
  PTB's ``Updater.stop`` relies on); updates are confirmed only by ``offset``, never popped when
  served; ``allowed_updates`` filters by update type and is remembered when omitted; a second
  poller gets 409 "terminated by other getUpdates request"; polling while a webhook is set gets
  409.
- ``getFile`` refuses files over 20 MB (400 "file is too big"), using the advertised size.
- HTML (``parse_mode=HTML``) is parsed: unsupported or unbalanced tags, a bare ``<`` or ``&``
  give 400 "can't parse entities" (stricter than Telegram about ``&``); text longer than 4096
  characters after parsing gives 400 "message is too long".
- Once ``setWebhook`` is called, pushed updates are POSTed to the webhook with
  ``Content-Type: application/json`` and ``X-Telegram-Bot-Api-Secret-Token``.

In tests::

    async with FakeTelegram() as tg:
        app = ApplicationBuilder().token(tg.token).base_url(tg.base_url)
                                  .base_file_url(tg.base_file_url).build()
        ...
        await tg.push_text(42, "hello")
        [reply] = await tg.wait_for("sendMessage")
        assert reply.params["text"] == "hello"

Standalone, for a dev script driving a real ``python -m bot`` child process::

    python -m standins.telegram --port 8081 --token 123:ABC

which also serves a control API under ``/_control/`` (see ``_control_routes``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import html
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientError, ClientSession, ClientTimeout, web

from standins._server import LoopbackServer

DEFAULT_TOKEN = "123456:TEST-token"
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024
"""The Bot API's getFile limit: 20 MB."""
MAX_TEXT_CHARS = 4096
"""Message text limit, in characters after entity parsing."""

UPDATE_TYPES: tuple[str, ...] = (
    "message", "edited_message", "channel_post", "edited_channel_post", "business_connection",
    "business_message", "edited_business_message", "deleted_business_messages",
    "message_reaction", "message_reaction_count", "inline_query", "chosen_inline_result",
    "callback_query", "shipping_query", "pre_checkout_query", "purchased_paid_media", "poll",
    "poll_answer", "my_chat_member", "chat_member", "chat_join_request", "chat_boost",
    "removed_chat_boost",
)
_NOT_BY_DEFAULT = frozenset({"chat_member", "message_reaction", "message_reaction_count"})
_JSON_FIELDS = frozenset({
    "reply_markup", "allowed_updates", "entities", "caption_entities", "reply_parameters",
    "commands", "scope", "link_preview_options", "media", "results", "message_ids",
})
_HTML_TAGS = frozenset({
    "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a",
    "code", "pre", "blockquote", "tg-emoji",
})
_TAG_RE = re.compile(
    r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[a-zA-Z-]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s>]+))?)*)"
    r"\s*>"
)
_ENTITY_RE = re.compile(r"&(?:#[0-9]+|#x[0-9a-fA-F]+|lt|gt|amp|quot);")
_COMMAND_RE = re.compile(r"(?<![\w/])/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?")
_MENTION_RE = re.compile(r"(?<![\w@])@[A-Za-z0-9_]{5,32}")
_DEFAULT_DESCRIPTIONS = {
    400: "Bad Request: injected fault",
    403: "Forbidden: bot was blocked by the user",
    409: "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running",
    500: "Internal Server Error",
    502: "Bad Gateway",
}


@dataclass(slots=True)
class Call:
    """One request the fake received.

    ``params`` holds the form/JSON fields as sent (numbers arrive as strings from PTB; JSON-valued
    fields such as ``reply_parameters`` or ``commands`` are decoded). ``files`` maps a multipart
    part name to its bytes. ``at`` is ``time.perf_counter()`` when the request arrived, in
    seconds. Downloads are recorded as method ``"<download>"`` with ``params["file_path"]``, and
    webhook deliveries as ``"<webhook>"`` with ``params["update_id"]`` and ``params["status"]``.
    ``result`` is what the fake answered (e.g. the sent message, with its ``message_id``), None
    until it answered or when it answered with an error.
    """

    method: str
    params: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)
    at: float = 0.0
    result: Any = None

    @property
    def chat_id(self) -> int | str | None:
        """``params["chat_id"]`` as an int when numeric (``"@channel"`` stays a string)."""
        return _int_or_str(self.params.get("chat_id"))

    @property
    def text(self) -> str | None:
        return self.params.get("text")

    def to_json(self) -> dict:
        """A JSON-safe view: file bytes are replaced by their sizes."""
        return {
            "method": self.method, "params": self.params, "at": self.at,
            "files": {name: len(data) for name, data in self.files.items()},
        }


@dataclass(slots=True)
class _StoredFile:
    file_id: str
    file_unique_id: str
    file_path: str
    data: bytes
    file_size: int


class _ApiError(Exception):
    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status, self.description, self.retry_after = status, description, retry_after

    def response(self) -> web.Response:
        body: dict[str, Any] = {
            "ok": False, "error_code": self.status, "description": self.description,
        }
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
        return web.json_response(body, status=self.status)


class FakeTelegram(LoopbackServer):
    """A Bot API server on ``host:port`` (port 0 picks a free one), started by ``start()`` or
    ``async with``. All state lives in memory; every public method must run on the loop the
    server runs on.

    Args:
        token: the bot token; requests with any other token get 401 "Unauthorized".
        bot_username: ``getMe``'s username (used for ``/cmd@username`` commands).
        host, port: where to listen.
        control_api: also serve ``/_control/*`` (the standalone entry point turns this on).
    """

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        bot_username: str = "voicerag_test_bot",
        host: str = "127.0.0.1",
        port: int = 0,
        control_api: bool = False,
    ) -> None:
        super().__init__(host, port)
        self.token = token
        self.is_control_api = control_api
        self.bot_user = {
            "id": int(token.split(":", 1)[0]) if token.split(":", 1)[0].isdigit() else 1,
            "is_bot": True, "first_name": "VoiceRAG", "username": bot_username,
            "can_join_groups": True, "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self.calls: list[Call] = []
        """Every request except getUpdates, in arrival order."""
        self.polls: list[Call] = []
        """Every getUpdates request, in arrival order."""
        self.commands: dict[tuple[str, str], list[dict]] = {}
        """setMyCommands results keyed by (scope type, language_code or "")."""
        self.webhook: dict[str, Any] | None = None
        """``{"url", "secret_token", "allowed_updates"}`` once setWebhook was called."""
        self.last_webhook_error: str = ""
        self._updates: list[dict] = []  # unconfirmed, in update_id order
        self._allowed: list[str] | None = None
        self._next_update_id = 1
        self._next_message_id = 1
        self._next_file = 1
        self._messages: dict[tuple[int | str, int], dict] = {}
        self._chats: dict[int | str, dict] = {}
        self._files: dict[str, _StoredFile] = {}
        self._faults: dict[str, list[_ApiError]] = {}
        self._poll_generation = 0
        self._seen: dict[str, int] = {}
        self._cond = asyncio.Condition()
        self._call_cond = asyncio.Condition()
        self._client: ClientSession | None = None
        self._webhook_task: asyncio.Task | None = None

    # ----------------------------------------------------------------- lifecycle

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        if self.is_control_api:
            app.add_routes(self._control_routes())
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.*}", self._download)
        return app

    async def stop(self) -> None:
        """Close the webhook client and the server; parked long polls are cancelled."""
        self.webhook = None
        await self._stop_webhook_loop()
        if self._client is not None:
            await self._client.close()
            self._client = None
        await super().stop()

    @property
    def base_url(self) -> str:
        """For ``ApplicationBuilder.base_url``: PTB appends the token."""
        return f"{self.url}/bot"

    @property
    def base_file_url(self) -> str:
        """For ``ApplicationBuilder.base_file_url``: PTB appends the token and the file path."""
        return f"{self.url}/file/bot"

    @property
    def pending_updates(self) -> list[dict]:
        """Updates not yet confirmed by an ``offset`` or, with a webhook, not yet delivered."""
        return list(self._updates)

    # ------------------------------------------------------------------ test side

    def fail_next(
        self,
        method: str,
        status: int,
        description: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        """Make the next call of ``method`` fail with HTTP ``status``.

        Faults queue up per method and each is used once. PTB maps 400 to ``BadRequest``,
        401/404 to ``InvalidToken``, 403 to ``Forbidden``, 409 to ``Conflict``, 429 with
        ``retry_after`` (seconds) to ``RetryAfter`` and 5xx to ``NetworkError``. Without a
        ``description`` a Telegram-like one is used.
        """
        if status == 429 and retry_after is None:
            retry_after = 1
        if description is None:
            description = (
                f"Too Many Requests: retry after {retry_after}" if status == 429
                else _DEFAULT_DESCRIPTIONS.get(status, f"Error {status}")
            )
        self._faults.setdefault(method, []).append(_ApiError(status, description, retry_after))

    def add_file(self, data: bytes, *, folder: str = "voice", suffix: str = ".oga",
                 file_size: int | None = None) -> str:
        """Store ``data`` for getFile and download; returns its ``file_id``.

        ``file_size`` is the size Telegram advertises (default ``len(data)``); set it above
        20 MB to fake an over-size file without allocating one.
        """
        n = self._next_file
        self._next_file += 1
        stored = _StoredFile(
            file_id=f"FILE-{n}", file_unique_id=f"U{n}", file_path=f"{folder}/file_{n}{suffix}",
            data=bytes(data), file_size=len(data) if file_size is None else file_size,
        )
        self._files[stored.file_id] = stored
        return stored.file_id

    async def push_text(
        self,
        chat_id: int,
        text: str,
        *,
        user_id: int | None = None,
        chat_type: str = "private",
        reply_to: int | None = None,
        language_code: str = "en",
    ) -> dict:
        """Queue a text message from a user (POSTed to the webhook if one is set).

        Returns the update dict.
        ``bot_command`` entities are added for ``/cmd`` and ``/cmd@bot``, ``mention`` entities
        for ``@username``, with UTF-16 offsets as Telegram sends them. ``reply_to`` is the
        message_id of an earlier message in the chat. ``user_id`` defaults to ``chat_id``.
        """
        message = self._user_message(chat_id, user_id, chat_type, language_code, reply_to)
        message["text"] = text
        entities = _entities(text)
        if entities:
            message["entities"] = entities
        return await self._push_message(message)

    async def push_voice(
        self,
        chat_id: int,
        ogg_bytes: bytes,
        duration_s: int,
        *,
        file_size: int | None = None,
        user_id: int | None = None,
        chat_type: str = "private",
        language_code: str = "en",
        mime_type: str = "audio/ogg",
    ) -> dict:
        """Queue a voice note of ``duration_s`` seconds (POSTed to the webhook if one is set).

        Returns the update dict.
        ``file_size`` is the size advertised in ``message.voice`` and by getFile (default
        ``len(ogg_bytes)``): pass e.g. 25_000_000 to fake an over-size note; getFile then
        answers 400 "file is too big", as Telegram does above 20 MB.
        """
        file_id = self.add_file(ogg_bytes, file_size=file_size)
        stored = self._files[file_id]
        message = self._user_message(chat_id, user_id, chat_type, language_code, None)
        message["voice"] = {
            "file_id": file_id, "file_unique_id": stored.file_unique_id,
            "duration": int(duration_s), "mime_type": mime_type, "file_size": stored.file_size,
        }
        return await self._push_message(message)

    async def push_update(self, raw: dict) -> dict:
        """Queue any update (POSTed to the webhook if one is set); returns it.

        ``update_id`` is assigned unless present. Messages in it are stored, so the bot can
        reply to them, edit them or delete them."""
        update = dict(raw)
        if "update_id" not in update:
            update["update_id"] = self._next_update_id
        self._next_update_id = max(self._next_update_id, update["update_id"]) + 1
        for key in ("message", "edited_message", "channel_post"):
            if isinstance(update.get(key), dict) and "chat" in update[key]:
                chat = update[key]["chat"]
                self._chats.setdefault(chat["id"], chat)
                self._messages[(chat["id"], update[key]["message_id"])] = update[key]
        async with self._cond:
            self._updates.append(update)
            self._cond.notify_all()
        return update

    async def wait_for(self, method: str, n: int = 1, timeout: float = 10) -> list[Call]:
        """The next ``n`` calls of ``method`` not returned by an earlier ``wait_for``.

        Waits up to ``timeout`` seconds; raises ``TimeoutError`` naming the calls seen so far.
        """
        def ready() -> bool:
            return len(self._of(method)) >= self._seen.get(method, 0) + n

        try:
            async with self._call_cond:
                await asyncio.wait_for(self._call_cond.wait_for(ready), timeout)
        except TimeoutError:
            seen = [c.method for c in self.calls]
            raise TimeoutError(
                f"waited {timeout} s for {n} new {method} call(s); calls so far: {seen}"
            ) from None
        start = self._seen.get(method, 0)
        self._seen[method] = start + n
        return self._of(method)[start:start + n]

    def methods(self) -> list[str]:
        """Names of the recorded calls, in order (getUpdates excluded)."""
        return [c.method for c in self.calls]

    def _of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    # -------------------------------------------------------------- webhook side

    WEBHOOK_RETRY_S = 0.05
    """Delay before a failed webhook delivery is retried (Telegram backs off longer)."""

    async def _webhook_loop(self) -> None:
        """While a webhook is set, POST pending updates to it in order, one at a time.

        A delivery that fails (connection refused, non-2xx) stays pending and is retried after
        ``WEBHOOK_RETRY_S``; ``run_webhook`` calls setWebhook before its server listens, so the
        first attempts may fail. Each attempt is recorded as ``"<webhook>"``.
        """
        while self.webhook is not None:
            async with self._cond:
                await self._cond.wait_for(lambda: bool(self._updates) or self.webhook is None)
                if self.webhook is None:
                    return
                update = self._updates[0]
                if not _is_allowed(update, self._allowed):
                    self._updates.pop(0)
                    continue
            if await self._deliver(update):
                async with self._cond:
                    if self._updates and self._updates[0] is update:
                        self._updates.pop(0)
            else:
                await asyncio.sleep(self.WEBHOOK_RETRY_S)

    async def _deliver(self, update: dict) -> bool:
        assert self.webhook is not None
        if self._client is None:
            self._client = ClientSession(timeout=ClientTimeout(total=10))
        headers = {"Content-Type": "application/json"}
        if self.webhook.get("secret_token"):
            headers["X-Telegram-Bot-Api-Secret-Token"] = self.webhook["secret_token"]
        status = 0
        try:
            async with self._client.post(
                self.webhook["url"], data=json.dumps(update).encode(), headers=headers
            ) as response:
                status = response.status
                await response.read()
        except (ClientError, OSError, TimeoutError) as exc:
            self.last_webhook_error = f"{type(exc).__name__}: {exc}"
        else:
            if not 200 <= status < 300:
                self.last_webhook_error = f"Wrong response from the webhook: {status}"
        await self._record(Call(
            "<webhook>", {"update_id": update["update_id"], "status": status},
            at=time.perf_counter(),
        ))
        return 200 <= status < 300

    async def _stop_webhook_loop(self) -> None:
        task, self._webhook_task = self._webhook_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # ----------------------------------------------------------------- API side

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        if request.match_info["token"] != self.token:
            return _ApiError(401, "Unauthorized").response()
        params, files = await _parse(request)
        call = Call(method, params, files, time.perf_counter())
        if method.lower() == "getupdates":
            self.polls.append(call)
        else:
            await self._record(call)
        try:
            faults = self._faults.get(method)
            if faults:
                raise faults.pop(0)
            handler = self._handlers().get(method.lower())
            if handler is None:
                raise _ApiError(404, "Not Found")
            result = await handler(params, files)
        except _ApiError as err:
            return err.response()
        call.result = result
        return web.json_response({"ok": True, "result": result})

    async def _download(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        if request.match_info["token"] != self.token:
            return _ApiError(401, "Unauthorized").response()
        await self._record(Call("<download>", {"file_path": path}, at=time.perf_counter()))
        for stored in self._files.values():
            if stored.file_path == path:
                return web.Response(body=stored.data, content_type="application/octet-stream")
        return _ApiError(404, "Not Found").response()

    async def _record(self, call: Call) -> None:
        async with self._call_cond:
            self.calls.append(call)
            self._call_cond.notify_all()

    def _handlers(self) -> dict:
        return {
            "getme": self._get_me,
            "logout": self._true,
            "close": self._true,
            "deletewebhook": self._delete_webhook,
            "setwebhook": self._set_webhook,
            "getwebhookinfo": self._get_webhook_info,
            "getupdates": self._get_updates,
            "sendmessage": self._send_message,
            "editmessagetext": self._edit_message_text,
            "deletemessage": self._delete_message,
            "sendchataction": self._send_chat_action,
            "setmycommands": self._set_my_commands,
            "getmycommands": self._get_my_commands,
            "deletemycommands": self._delete_my_commands,
            "getfile": self._get_file,
            "sendvoice": self._send_voice,
            "answercallbackquery": self._true,
        }

    async def _true(self, params: dict, files: dict) -> bool:
        return True

    async def _get_me(self, params: dict, files: dict) -> dict:
        return self.bot_user

    async def _delete_webhook(self, params: dict, files: dict) -> bool:
        self.webhook = None
        await self._stop_webhook_loop()
        if _truthy(params.get("drop_pending_updates")):
            async with self._cond:
                self._updates.clear()
        return True

    async def _set_webhook(self, params: dict, files: dict) -> bool:
        url = params.get("url") or ""
        if not url:
            return await self._delete_webhook(params, files)
        secret = params.get("secret_token") or ""
        if secret and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", secret):
            raise _ApiError(400, "Bad Request: secret token contains unallowed characters")
        if params.get("allowed_updates") is not None:
            self._allowed = list(params["allowed_updates"])
        if _truthy(params.get("drop_pending_updates")):
            self._updates.clear()
        await self._stop_webhook_loop()
        self.webhook = {"url": url, "secret_token": secret, "allowed_updates": self._allowed}
        self._webhook_task = asyncio.create_task(self._webhook_loop())
        return True

    async def _get_webhook_info(self, params: dict, files: dict) -> dict:
        info: dict[str, Any] = {
            "url": self.webhook["url"] if self.webhook else "",
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
        }
        if self.last_webhook_error:
            info["last_error_message"] = self.last_webhook_error
            info["last_error_date"] = int(time.time())
        return info

    async def _get_updates(self, params: dict, files: dict) -> list[dict]:
        if self.webhook is not None:
            raise _ApiError(409, "Conflict: can't use getUpdates method while webhook is "
                                 "active; use deleteWebhook to delete the webhook first")
        offset = int(params.get("offset") or 0)
        limit = min(max(int(params.get("limit") or 100), 1), 100)
        timeout = max(float(params.get("timeout") or 0), 0.0)
        if params.get("allowed_updates") is not None:
            self._allowed = list(params["allowed_updates"])
        async with self._cond:
            self._poll_generation += 1
            generation = self._poll_generation
            self._cond.notify_all()  # an older parked poll is terminated (409)
            self._confirm(offset)

            def ready() -> list[dict]:
                return [u for u in self._updates if _is_allowed(u, self._allowed)][:limit]

            def woken() -> bool:
                return bool(ready()) or self._poll_generation != generation

            if not ready() and timeout > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._cond.wait_for(woken), timeout)
            if self._poll_generation != generation:
                raise _ApiError(409, _DEFAULT_DESCRIPTIONS[409])
            return ready()

    def _confirm(self, offset: int) -> None:
        """Telegram's rule: ``offset`` confirms every update with a smaller id; a negative
        offset keeps only the last ``-offset`` updates."""
        if offset > 0:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        elif offset < 0:
            self._updates = self._updates[offset:]

    async def _send_message(self, params: dict, files: dict) -> dict:
        chat = self._chat(params)
        text = params.get("text") or ""
        plain = _parse_text(text, params.get("parse_mode"))
        message = self._bot_message(chat, params)
        message["text"] = plain
        return message

    async def _edit_message_text(self, params: dict, files: dict) -> dict | bool:
        text = params.get("text") or ""
        plain = _parse_text(text, params.get("parse_mode"))
        if params.get("inline_message_id"):
            return True
        chat = self._chat(params)
        key = (chat["id"], int(params.get("message_id") or 0))
        message = self._messages.get(key)
        if message is None:
            raise _ApiError(400, "Bad Request: message to edit not found")
        if message.get("text") == plain and "reply_markup" not in params:
            raise _ApiError(400, "Bad Request: message is not modified: specified new message "
                                 "content and reply markup are exactly the same as a current "
                                 "content and reply markup of the message")
        message = {**message, "text": plain, "edit_date": int(time.time())}
        if isinstance(params.get("reply_markup"), dict):
            message["reply_markup"] = params["reply_markup"]
        self._messages[key] = message
        return message

    async def _delete_message(self, params: dict, files: dict) -> bool:
        chat = self._chat(params)
        if self._messages.pop((chat["id"], int(params.get("message_id") or 0)), None) is None:
            raise _ApiError(400, "Bad Request: message to delete not found")
        return True

    async def _send_chat_action(self, params: dict, files: dict) -> bool:
        self._chat(params)
        return True

    async def _set_my_commands(self, params: dict, files: dict) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list):
            raise _ApiError(400, "Bad Request: can't parse commands JSON object")
        self.commands[self._commands_key(params)] = commands
        return True

    async def _get_my_commands(self, params: dict, files: dict) -> list[dict]:
        return self.commands.get(self._commands_key(params), [])

    async def _delete_my_commands(self, params: dict, files: dict) -> bool:
        self.commands.pop(self._commands_key(params), None)
        return True

    @staticmethod
    def _commands_key(params: dict) -> tuple[str, str]:
        scope = params.get("scope")
        scope_type = scope.get("type", "default") if isinstance(scope, dict) else "default"
        return scope_type, params.get("language_code") or ""

    async def _get_file(self, params: dict, files: dict) -> dict:
        stored = self._files.get(params.get("file_id") or "")
        if stored is None:
            raise _ApiError(400, "Bad Request: invalid file_id")
        if stored.file_size > MAX_DOWNLOAD_BYTES:
            raise _ApiError(400, "Bad Request: file is too big")
        return {
            "file_id": stored.file_id, "file_unique_id": stored.file_unique_id,
            "file_size": stored.file_size, "file_path": stored.file_path,
        }

    async def _send_voice(self, params: dict, files: dict) -> dict:
        chat = self._chat(params)
        voice = params.get("voice")
        if "voice" in files:
            file_id = self.add_file(files["voice"])
        elif isinstance(voice, str) and voice.startswith("attach://") and voice[9:] in files:
            file_id = self.add_file(files[voice[9:]])
        elif isinstance(voice, str) and voice in self._files:
            file_id = voice
        else:
            raise _ApiError(400, "Bad Request: there is no voice in the request")
        stored = self._files[file_id]
        message = self._bot_message(chat, params)
        message["voice"] = {
            "file_id": stored.file_id, "file_unique_id": stored.file_unique_id,
            "duration": int(float(params.get("duration") or 0)), "mime_type": "audio/ogg",
            "file_size": stored.file_size,
        }
        if params.get("caption"):
            message["caption"] = _parse_text(params["caption"], params.get("parse_mode"), 1024)
        return message

    # ------------------------------------------------------------------ helpers

    def _chat(self, params: dict) -> dict:
        chat_id = _int_or_str(params.get("chat_id"))
        chat = self._chats.get(chat_id)  # type: ignore[arg-type]
        if chat is None:
            raise _ApiError(400, "Bad Request: chat not found")
        return chat

    def _bot_message(self, chat: dict, params: dict) -> dict:
        message: dict[str, Any] = {
            "message_id": self._new_message_id(), "date": int(time.time()),
            "chat": chat, "from": self.bot_user,
        }
        reply = params.get("reply_parameters")
        reply_id = reply.get("message_id") if isinstance(reply, dict) else None
        reply_id = reply_id or params.get("reply_to_message_id")
        if reply_id:
            replied = self._messages.get((chat["id"], int(reply_id)))
            allow = isinstance(reply, dict) and reply.get("allow_sending_without_reply")
            if replied is not None:
                message["reply_to_message"] = replied
            elif not allow:
                raise _ApiError(400, "Bad Request: message to be replied not found")
        if isinstance(params.get("reply_markup"), dict):
            message["reply_markup"] = params["reply_markup"]
        self._messages[(chat["id"], message["message_id"])] = message
        return message

    def _user_message(self, chat_id: int, user_id: int | None, chat_type: str,
                      language_code: str, reply_to: int | None) -> dict:
        user = self._user(chat_id if user_id is None else user_id, language_code)
        if chat_type == "private":
            chat = {"id": chat_id, "type": "private", "first_name": user["first_name"],
                    "username": user["username"]}
        else:
            chat = {"id": chat_id, "type": chat_type, "title": f"Test {chat_type} {chat_id}"}
        self._chats[chat_id] = chat
        message: dict[str, Any] = {
            "message_id": self._new_message_id(), "date": int(time.time()), "chat": chat,
            "from": user,
        }
        if reply_to is not None:
            message["reply_to_message"] = self._messages.get(
                (chat_id, reply_to), {"message_id": reply_to, "date": 0, "chat": chat}
            )
        return message

    @staticmethod
    def _user(user_id: int, language_code: str) -> dict:
        return {"id": user_id, "is_bot": False, "first_name": f"User{user_id}",
                "username": f"user{user_id}", "language_code": language_code}

    def _new_message_id(self) -> int:
        self._next_message_id += 1
        return self._next_message_id - 1

    async def _push_message(self, message: dict) -> dict:
        return await self.push_update({"message": message})

    # ------------------------------------------------------------- control API

    def _control_routes(self) -> list[web.RouteDef]:
        """``/_control/*`` for scripts driving a bot in another process:

        - ``POST /_control/push_text`` JSON ``{chat_id, text, user_id?, chat_type?, reply_to?,
          language_code?}`` -> the update
        - ``POST /_control/push_voice?chat_id=42&duration=3[&file_size=N]`` raw OGG body
          -> the update
        - ``POST /_control/push_update`` JSON update -> the update
        - ``POST /_control/fail_next`` JSON ``{method, status, description?, retry_after?}``
        - ``GET /_control/calls[?method=sendMessage]`` -> list of calls (file sizes only)
        - ``GET /_control/wait?method=sendMessage[&n=1&timeout=10]`` -> the next n calls,
          or 504 on timeout
        - ``GET /_control/sent_file?method=sendVoice`` -> the bytes of the file uploaded by the
          last call of ``method`` (e.g. the bot's voice reply), or 404
        """
        async def push_text(request: web.Request) -> web.Response:
            body = await request.json()
            update = await self.push_text(
                int(body["chat_id"]), body["text"], user_id=body.get("user_id"),
                chat_type=body.get("chat_type", "private"), reply_to=body.get("reply_to"),
                language_code=body.get("language_code", "en"),
            )
            return web.json_response(update)

        async def push_voice(request: web.Request) -> web.Response:
            q = request.query
            file_size = int(q["file_size"]) if "file_size" in q else None
            update = await self.push_voice(
                int(q["chat_id"]), await request.read(), int(q.get("duration", "1")),
                file_size=file_size, language_code=q.get("language_code", "en"),
            )
            return web.json_response(update)

        async def push_update(request: web.Request) -> web.Response:
            return web.json_response(await self.push_update(await request.json()))

        async def fail_next(request: web.Request) -> web.Response:
            body = await request.json()
            self.fail_next(body["method"], int(body["status"]), body.get("description"),
                           body.get("retry_after"))
            return web.json_response({"ok": True})

        async def calls(request: web.Request) -> web.Response:
            method = request.query.get("method")
            rows = [c.to_json() for c in self.calls if method is None or c.method == method]
            return web.json_response(rows)

        async def wait(request: web.Request) -> web.Response:
            q = request.query
            try:
                found = await self.wait_for(q["method"], int(q.get("n", "1")),
                                            float(q.get("timeout", "10")))
            except TimeoutError as exc:
                return web.json_response({"error": str(exc)}, status=504)
            return web.json_response([c.to_json() for c in found])

        async def sent_file(request: web.Request) -> web.Response:
            method = request.query.get("method", "sendVoice")
            found = [c for c in self.calls if c.method == method and c.files]
            if not found:
                return web.json_response({"error": f"no {method} call with a file"}, status=404)
            [data, *_] = found[-1].files.values()
            return web.Response(body=data, content_type="application/octet-stream")

        return [
            web.post("/_control/push_text", push_text),
            web.post("/_control/push_voice", push_voice),
            web.post("/_control/push_update", push_update),
            web.post("/_control/fail_next", fail_next),
            web.get("/_control/calls", calls),
            web.get("/_control/wait", wait),
            web.get("/_control/sent_file", sent_file),
        ]


# --------------------------------------------------------------------- parsing


async def _parse(request: web.Request) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Query string plus a JSON, multipart or url-encoded body -> (params, files)."""
    params: dict[str, Any] = dict(request.query)
    files: dict[str, bytes] = {}
    if request.body_exists:
        if request.content_type == "application/json":
            body = await request.json()
            if isinstance(body, dict):
                params.update(body)
        else:
            form = await request.post()
            for name, value in form.items():
                if isinstance(value, web.FileField):
                    files[name] = value.file.read()
                else:
                    params[name] = value
    for name in _JSON_FIELDS & params.keys():
        if isinstance(params[name], str):
            with contextlib.suppress(ValueError):
                params[name] = json.loads(params[name])
    return params, files


def _parse_text(text: str, parse_mode: str | None, limit: int = MAX_TEXT_CHARS) -> str:
    """The plain text Telegram would show, or ``_ApiError`` 400 as Telegram answers."""
    try:
        plain = parse_html(text) if (parse_mode or "").upper() == "HTML" else text
    except HtmlError as exc:
        raise _ApiError(400, f"Bad Request: can't parse entities: {exc}") from None
    if not plain.strip():
        raise _ApiError(400, "Bad Request: message text is empty")
    if len(plain) > limit:
        raise _ApiError(400, "Bad Request: message is too long")
    return plain


class HtmlError(ValueError):
    """Markup Telegram would refuse with 400 "can't parse entities"."""


def parse_html(text: str) -> str:
    """The plain text Telegram shows for ``parse_mode=HTML`` text.

    Raises:
        HtmlError: an unsupported tag, an unbalanced tag, a bare ``<`` or ``>``, or a ``&``
            that does not start ``&lt; &gt; &amp; &quot;`` or a numeric entity (stricter than
            Telegram, which lets some bare ``&`` through).
    """
    out: list[str] = []
    stack: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "<":
            match = _TAG_RE.match(text, i)
            offset = len(text[:i].encode())
            if match is None:
                raise HtmlError(f"Unexpected end of name token at byte offset {offset}")
            closing, name = match.group(1) == "/", match.group(2).lower()
            if closing:
                if not stack:
                    raise HtmlError(f"Unmatched end tag at byte offset {offset}, no start tag")
                if stack[-1] != name:
                    raise HtmlError(f"Unmatched end tag at byte offset {offset}, "
                                    f"expected \"</{stack[-1]}>\", found \"</{name}>\"")
                stack.pop()
            else:
                if name not in _HTML_TAGS:
                    raise HtmlError(f"Unsupported start tag \"{name}\" at byte offset {offset}")
                stack.append(name)
            i = match.end()
        elif char == "&":
            match = _ENTITY_RE.match(text, i)
            if match is None:
                raise HtmlError(f"bare '&' at byte offset {len(text[:i].encode())}")
            out.append(html.unescape(match.group(0)))
            i = match.end()
        elif char == ">":
            raise HtmlError(f"bare '>' at byte offset {len(text[:i].encode())}")
        else:
            out.append(char)
            i += 1
    if stack:
        raise HtmlError(f"Can't find end tag corresponding to start tag \"{stack[-1]}\"")
    return "".join(out)


def _entities(text: str) -> list[dict]:
    """``bot_command`` and ``mention`` entities with UTF-16 offsets and lengths."""
    def utf16(s: str) -> int:
        return len(s.encode("utf-16-le")) // 2

    found = [("bot_command", m) for m in _COMMAND_RE.finditer(text)]
    found += [("mention", m) for m in _MENTION_RE.finditer(text)]
    found.sort(key=lambda pair: pair[1].start())
    return [
        {"type": kind, "offset": utf16(text[:m.start()]), "length": utf16(m.group(0))}
        for kind, m in found
    ]


def _is_allowed(update: dict, allowed: list[str] | None) -> bool:
    kind = next((k for k in update if k != "update_id"), "")
    if not allowed:  # None or []: everything but the opt-in types
        return kind not in _NOT_BY_DEFAULT
    return kind in allowed


def _truthy(value: Any) -> bool:
    return value in (True, "true", "True", "1", 1)


def _int_or_str(value: Any) -> int | str | None:
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
        return int(value)
    return value


# ---------------------------------------------------------------- entry point


async def _serve(host: str, port: int, token: str) -> None:
    async with FakeTelegram(token, host=host, port=port, control_api=True) as fake:
        print(f"fake Telegram on {fake.url} token={token} base_url={fake.base_url} "
              f"base_file_url={fake.base_file_url} control={fake.url}/_control/", flush=True)
        await fake.run_until_signal()


def main(argv: list[str] | None = None) -> None:
    """``python -m standins.telegram [--host 127.0.0.1] [--port 8081] [--token 123:ABC]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--token", default=DEFAULT_TOKEN)
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.host, args.port, args.token))


if __name__ == "__main__":
    main()
