"""The fake Bot API server, exercised by the real python-telegram-bot library over real HTTP."""

from __future__ import annotations

import asyncio
import io
import json
import socket
import subprocess
import sys
import time
import warnings
from datetime import timedelta

import httpx
import pytest
from telegram import Bot, Update
from telegram.error import BadRequest, Conflict, Forbidden, InvalidToken, RetryAfter
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from standins.telegram import FakeTelegram

OGG = b"OggS" + bytes(range(256)) * 30  # 7,684 bytes; only the magic matters here


async def echo_text(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await update.message.reply_text(f"echo: {update.message.text}")


async def echo_voice(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await update.message.reply_chat_action("typing")
    voice_file = await update.message.voice.get_file()
    buffer = io.BytesIO()
    await voice_file.download_to_memory(out=buffer)
    context.chat_data["voice"] = buffer.getvalue()
    await update.message.reply_text(f"heard {len(buffer.getvalue())} bytes")


async def start_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await update.message.reply_text("<b>hello</b>", parse_mode="HTML")


def build_app(tg: FakeTelegram, errors: list[BaseException] | None = None) -> Application:
    app = (
        ApplicationBuilder()
        .token(tg.token)
        .base_url(tg.base_url)
        .base_file_url(tg.base_file_url)
        .build()
    )
    app.add_handler(CommandHandler("start", start_command))
    app.add_handler(MessageHandler(filters.VOICE, echo_voice))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo_text))
    if errors is not None:
        async def on_error(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
            errors.append(context.error)
        app.add_error_handler(on_error)
    return app


@pytest.fixture
async def tg():
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def errors() -> list[BaseException]:
    return []


@pytest.fixture
async def polling_app(tg: FakeTelegram, errors: list[BaseException]):
    app = build_app(tg, errors)
    async with app:
        await app.start()
        await app.updater.start_polling(timeout=5, allowed_updates=Update.ALL_TYPES)
        yield app
        if app.updater.running:
            await app.updater.stop()
        await app.stop()


def retry_after_s(error: RetryAfter) -> float:
    """``error.retry_after`` in seconds (an int today, a timedelta in PTB's next major)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = error.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else value


async def test_text_round_trip_reaches_the_handler_and_the_reply_is_recorded(tg, polling_app):
    await tg.push_text(42, "hello there")
    [reply] = await tg.wait_for("sendMessage")
    assert reply.text == "echo: hello there"
    assert reply.chat_id == 42
    assert tg.methods()[:2] == ["getMe", "deleteWebhook"]


async def test_command_gets_bot_command_entity_and_html_parse_mode_is_recorded(tg, polling_app):
    update = await tg.push_text(42, "/start@voicerag_test_bot ask @someone")
    assert update["message"]["entities"] == [
        {"type": "bot_command", "offset": 0, "length": 24},
        {"type": "mention", "offset": 29, "length": 8},
    ]
    [reply] = await tg.wait_for("sendMessage")
    assert reply.params["parse_mode"] == "HTML"
    assert reply.text == "<b>hello</b>"


async def test_voice_get_file_and_download_return_the_same_bytes(tg, polling_app):
    await tg.push_voice(42, OGG, duration_s=3)
    [reply] = await tg.wait_for("sendMessage")
    assert reply.text == f"heard {len(OGG)} bytes"
    assert polling_app.chat_data[42]["voice"] == OGG
    methods = tg.methods()
    assert methods[-4:] == ["sendChatAction", "getFile", "<download>", "sendMessage"]
    [download] = [c for c in tg.calls if c.method == "<download>"]
    assert download.params["file_path"].startswith("voice/file_")


async def test_over_20mb_voice_advertises_its_size_and_get_file_refuses(tg):
    update = await tg.push_voice(42, OGG, duration_s=600, file_size=25_000_000)
    assert update["message"]["voice"]["file_size"] == 25_000_000
    async with Bot(tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url) as bot:
        with pytest.raises(BadRequest, match="too big"):
            await bot.get_file(update["message"]["voice"]["file_id"])


async def test_injected_429_raises_retry_after_with_the_servers_value(tg, polling_app, errors):
    tg.fail_next("sendMessage", 429, retry_after=7)
    await tg.push_text(42, "first")
    await tg.wait_for("sendMessage")
    for _ in range(100):
        if errors:
            break
        await asyncio.sleep(0.01)
    [error] = errors
    assert isinstance(error, RetryAfter)
    assert retry_after_s(error) == 7
    await tg.push_text(42, "second")  # the fault was used once
    [reply] = await tg.wait_for("sendMessage")
    assert reply.text == "echo: second"


async def test_injected_403_raises_forbidden(tg):
    await tg.push_text(42, "hi")
    tg.fail_next("sendMessage", 403)
    async with Bot(tg.token, base_url=tg.base_url) as bot:
        with pytest.raises(Forbidden, match="blocked"):
            await bot.send_message(42, "hello")
        assert (await bot.send_message(42, "again")).text == "again"


async def test_injected_409_on_get_updates_raises_conflict(tg):
    tg.fail_next("getUpdates", 409)
    async with Bot(tg.token, base_url=tg.base_url) as bot:
        with pytest.raises(Conflict, match="other getUpdates"):
            await bot.get_updates(timeout=0)


async def test_wrong_token_is_rejected_as_invalid(tg):
    async with FakeTelegram("999:WRONG") as other:
        bot = Bot(tg.token, base_url=other.base_url)
        with pytest.raises(InvalidToken):
            await bot.initialize()


async def test_malformed_html_is_refused_like_telegram(tg):
    await tg.push_text(42, "hi")
    async with Bot(tg.token, base_url=tg.base_url) as bot:
        with pytest.raises(BadRequest, match="(?i)can't parse entities"):
            await bot.send_message(42, "<b>open", parse_mode="HTML")
        with pytest.raises(BadRequest, match="(?i)can't parse entities"):
            await bot.send_message(42, "1 < 2", parse_mode="HTML")
        with pytest.raises(BadRequest, match="too long"):
            await bot.send_message(42, "x" * 4097)
        ok = await bot.send_message(42, "<b>1 &lt; 2</b> &amp; ok", parse_mode="HTML")
        assert ok.text == "1 < 2 & ok"


async def test_reply_to_and_edit_and_delete_act_on_stored_messages(tg):
    update = await tg.push_text(42, "question")
    asked = update["message"]["message_id"]
    async with Bot(tg.token, base_url=tg.base_url) as bot:
        sent = await bot.send_message(42, "working", reply_to_message_id=asked)
        assert sent.reply_to_message.message_id == asked
        edited = await bot.edit_message_text("done", chat_id=42, message_id=sent.message_id)
        assert edited.text == "done"
        with pytest.raises(BadRequest, match="not modified"):
            await bot.edit_message_text("done", chat_id=42, message_id=sent.message_id)
        assert await bot.delete_message(42, sent.message_id)
        with pytest.raises(BadRequest, match="not found"):
            await bot.delete_message(42, sent.message_id)
        with pytest.raises(BadRequest, match="(?i)chat not found"):
            await bot.send_message(777, "nobody here")
    [call] = [c for c in tg.calls if c.method == "sendMessage"][:1]
    assert call.params["reply_parameters"]["message_id"] == asked


async def test_set_my_commands_records_commands_per_language(tg):
    async with Bot(tg.token, base_url=tg.base_url) as bot:
        await bot.set_my_commands([("lang", "choose language")])
        await bot.set_my_commands([("lang", "भाषा चुनें")], language_code="hi")
        assert [c.command for c in await bot.get_my_commands(language_code="hi")] == ["lang"]
    assert tg.commands[("default", "hi")] == [{"command": "lang", "description": "भाषा चुनें"}]
    assert tg.commands[("default", "")][0]["description"] == "choose language"
    [first, second] = await tg.wait_for("setMyCommands", n=2)
    assert second.params["language_code"] == "hi"


async def test_send_voice_upload_is_stored_and_downloadable(tg):
    await tg.push_text(42, "hi")
    async with Bot(tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url) as bot:
        message = await bot.send_voice(42, voice=OGG, duration=3)
        [call] = await tg.wait_for("sendVoice")
        assert call.files["voice"] == OGG
        voice_file = await bot.get_file(message.voice.file_id)
        assert bytes(await voice_file.download_as_bytearray()) == OGG


async def test_updater_stop_is_fast_because_timeout_zero_is_honoured(tg, polling_app):
    await asyncio.sleep(0.05)  # let the long poll park
    started = time.perf_counter()
    await polling_app.updater.stop()
    elapsed_s = time.perf_counter() - started
    assert elapsed_s < 1.0
    assert tg.polls[-1].params["timeout"] == "0"


async def test_long_poll_waits_for_timeout_when_nothing_is_queued(tg):
    async with httpx.AsyncClient() as client:
        started = time.perf_counter()
        response = await client.post(f"{tg.base_url}{tg.token}/getUpdates", data={"timeout": "0.3"})
        assert response.json() == {"ok": True, "result": []}
        assert time.perf_counter() - started >= 0.25
        started = time.perf_counter()
        await client.post(f"{tg.base_url}{tg.token}/getUpdates", data={"timeout": "0"})
        assert time.perf_counter() - started < 0.2


async def test_long_poll_wakes_as_soon_as_an_update_is_pushed(tg):
    async with Bot(tg.token, base_url=tg.base_url) as bot:
        poll = asyncio.create_task(bot.get_updates(timeout=3))
        await asyncio.sleep(0.05)
        started = time.perf_counter()
        await tg.push_text(42, "wake up")
        [update] = await poll
        assert time.perf_counter() - started < 0.5
        assert update.message.text == "wake up"


async def test_offset_confirms_and_serving_never_pops(tg):
    for i in range(3):
        await tg.push_text(42, f"m{i}")
    async with Bot(tg.token, base_url=tg.base_url) as bot:
        first = await bot.get_updates(timeout=0)
        again = await bot.get_updates(timeout=0)
        assert [u.update_id for u in first] == [u.update_id for u in again] == [1, 2, 3]
        rest = await bot.get_updates(offset=2, timeout=0)
        assert [u.message.text for u in rest] == ["m1", "m2"]
        assert [u["update_id"] for u in tg.pending_updates] == [2, 3]
        assert await bot.get_updates(offset=4, timeout=0) == ()
        assert tg.pending_updates == []


async def test_no_update_is_lost_or_repeated_across_an_updater_restart(tg, errors):
    app = build_app(tg, errors)
    async with app:
        await app.start()
        await app.updater.start_polling(timeout=5)
        for i in range(5):
            await tg.push_text(42, f"a{i}")
        await tg.wait_for("sendMessage", n=5)
        await app.updater.stop()
        for i in range(5):
            await tg.push_text(42, f"b{i}")
        await app.updater.start_polling(timeout=5)
        await tg.wait_for("sendMessage", n=5)
        await app.updater.stop()
        await app.stop()
    texts = [c.text for c in tg.calls if c.method == "sendMessage"]
    assert texts == [f"echo: a{i}" for i in range(5)] + [f"echo: b{i}" for i in range(5)]
    assert tg.pending_updates == []
    assert errors == []


async def test_allowed_updates_filters_update_types(tg):
    sent = await tg.push_text(42, "hi")
    await tg.push_update({"edited_message": dict(sent["message"], text="hi!", edit_date=1)})
    async with Bot(tg.token, base_url=tg.base_url) as bot:
        only_messages = await bot.get_updates(timeout=0, allowed_updates=["message"])
        assert [u.update_id for u in only_messages] == [1]
        remembered = await bot.get_updates(timeout=0)  # omitted: the last list still applies
        assert [u.update_id for u in remembered] == [1]
        both = await bot.get_updates(timeout=0, allowed_updates=["message", "edited_message"])
        assert [u.update_id for u in both] == [1, 2]


async def test_second_poller_terminates_the_first_with_conflict(tg):
    async with Bot(tg.token, base_url=tg.base_url) as bot, \
            Bot(tg.token, base_url=tg.base_url) as other:
        first = asyncio.create_task(bot.get_updates(timeout=3))
        await asyncio.sleep(0.05)
        await other.get_updates(timeout=0)
        with pytest.raises(Conflict):
            await first


async def test_webhook_mode_posts_updates_with_the_secret_and_exact_content_type(tg):
    received: list[tuple[dict, dict]] = []
    from aiohttp import web

    async def hook(request: web.Request) -> web.Response:
        received.append((dict(request.headers), await request.json()))
        return web.Response(text="ok")

    hook_app = web.Application()
    hook_app.router.add_post("/hook", hook)
    runner = web.AppRunner(hook_app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        async with Bot(tg.token, base_url=tg.base_url) as bot:
            await bot.set_webhook(f"http://127.0.0.1:{port}/hook", secret_token="s3cret_-x")
            await tg.push_text(42, "via webhook")
            [delivery] = await tg.wait_for("<webhook>")
            assert delivery.params["status"] == 200
            with pytest.raises(Conflict, match="webhook is active"):
                await bot.get_updates(timeout=0)
        [(headers, body)] = received
        assert headers["Content-Type"] == "application/json"
        assert headers["X-Telegram-Bot-Api-Secret-Token"] == "s3cret_-x"
        assert body["message"]["text"] == "via webhook"
        assert tg.pending_updates == []
    finally:
        await runner.cleanup()


async def test_ptb_webhook_server_receives_pushed_updates(tg):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = build_app(tg)
    async with app:
        await app.start()
        await app.updater.start_webhook(
            listen="127.0.0.1", port=port, url_path="tg", secret_token="abc",
            webhook_url=f"http://127.0.0.1:{port}/tg",
        )
        await tg.push_text(42, "hello hook")
        [reply] = await tg.wait_for("sendMessage")
        await app.updater.stop()
        await app.stop()
    assert reply.text == "echo: hello hook"
    assert tg.webhook["secret_token"] == "abc"


def test_standalone_entry_point_serves_the_bot_api_and_control_api():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "standins.telegram", "--port", str(port), "--token", "123:ABC"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert "base_url=" in proc.stdout.readline()
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=5) as client:
            assert client.post("/bot123:ABC/getMe").json()["result"]["is_bot"] is True
            client.post("/_control/push_text", json={"chat_id": 5, "text": "ping"})
            voice = client.post("/_control/push_voice?chat_id=5&duration=2", content=OGG).json()
            updates = client.post("/bot123:ABC/getUpdates", data={"timeout": "0"}).json()
            assert [u["message"].get("text") for u in updates["result"]] == ["ping", None]
            file_id = voice["message"]["voice"]["file_id"]
            path = client.post("/bot123:ABC/getFile", data={"file_id": file_id}).json()
            assert client.get(f"/file/bot123:ABC/{path['result']['file_path']}").content == OGG
            client.post("/bot123:ABC/sendMessage", data={"chat_id": "5", "text": "pong"})
            waited = client.get("/_control/wait", params={"method": "sendMessage"}).json()
            assert waited[0]["params"] == {"chat_id": "5", "text": "pong"}
            calls = client.get("/_control/calls").json()
            assert [c["method"] for c in calls] == [
                "getMe", "getFile", "<download>", "sendMessage"
            ]
            assert json.dumps(calls)
    finally:
        proc.terminate()
        assert proc.wait(timeout=5) == 0
