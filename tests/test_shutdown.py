"""Issue 30: background loops end when cancelled, and every shutdown is bounded.

Each test cancels a loop while its database call is in flight on PostgreSQL and cannot finish:
a second connection holds a lock on the table the call needs, and the server process serving
the call is then frozen (SIGSTOP), so psycopg's own cancellation of the query gets no answer.
psycopg then closes the connection after its 5 s and re-raises the ``CancelledError``, but the
transaction's rollback on the closed connection raises ``OperationalError`` in its place: the
way a cancellation turns into a driver error (``bot.chat.tasks``). Before the fix, the prune loop
logged that error and went on (``Services.close()`` waited for it forever) and a cancelled drain
retried its chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable
from types import SimpleNamespace

import psycopg
import pytest
from telegram.error import NetworkError

from bot.chat.dispatch import ChatDispatcher, Replicas
from bot.chat.inbox import ChannelInbox
from bot.chat.services import Services
from bot.chat.state import SharedState
from bot.chat.tasks import STOP_WAIT_S, raise_if_cancelled, stop_tasks
from bot.settings import Settings, TelegramSettings
from bot.telegram import handlers
from clients.openrouter import OpenRouterSettings
from clients.stt import SarvamSettings
from storage.db import Database
from storage.inbox import Inbox

CLOSE_BOUND_S = 2.0
"""What issue 30 allows a close that has to abandon a stuck task."""
PSYCOPG_CANCEL_S = 5.0
"""psycopg's wait for the server to cancel a query before it closes the connection
(``AsyncConnection.wait``, psycopg 3.3)."""


@contextlib.asynccontextmanager
async def stuck_in_postgres(url: str, table: str, statement: str) -> AsyncIterator[_Freezer]:
    """Hold an exclusive lock on ``table`` while the block runs; yield a :class:`_Freezer`
    that freezes the server process of the query starting with ``statement`` once it waits
    for the lock. On exit the process is let go (SIGCONT) and the lock released."""
    with psycopg.connect(url, autocommit=True) as locker, \
            psycopg.connect(url, autocommit=True) as watcher:
        locker.execute("BEGIN")
        locker.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        freezer = _Freezer(watcher, statement)
        try:
            yield freezer
        finally:
            for pid in freezer.stopped:
                os.kill(pid, signal.SIGCONT)
            locker.execute("ROLLBACK")


class _Freezer:
    """Finds a query waiting for the lock (``watcher``: a connection outside any transaction,
    whose view of ``pg_stat_activity`` is fresh at each query) and freezes its process."""

    def __init__(self, watcher: psycopg.Connection, statement: str) -> None:
        self.watcher, self.statement = watcher, statement
        self.stopped: list[int] = []

    async def freeze(self, timeout_s: float = 30.0) -> int:
        """Wait until the statement waits on the lock, then SIGSTOP its server process."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            row = self.watcher.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE %s", (self.statement + "%",)).fetchone()
            if row is not None:
                os.kill(row[0], signal.SIGSTOP)
                self.stopped.append(row[0])
                return row[0]
            await asyncio.sleep(0.05)
        rows = self.watcher.execute("SELECT pid, wait_event_type, query "
                                    "FROM pg_stat_activity").fetchall()
        raise AssertionError(f"no query {self.statement!r} waited on the lock: {rows}")


async def assert_bounded(close: Awaitable[None], what: str, caplog) -> None:
    """``close`` returns within :data:`CLOSE_BOUND_S`, having logged that it abandoned ``what``
    (a hang fails after ten times that instead of waiting forever)."""
    start = time.monotonic()
    await asyncio.wait_for(close, 10 * CLOSE_BOUND_S)
    took_s = time.monotonic() - start
    assert took_s <= CLOSE_BOUND_S, took_s
    assert f"task_abandoned what={what}" in caplog.text


async def wait_done(task: asyncio.Task, timeout_s: float) -> bool:
    await asyncio.wait({task}, timeout=timeout_s)
    return task.done()


@pytest.mark.slow
async def test_services_close_is_bounded_and_the_prune_loop_ends_while_its_delete_hangs(
        pg_url, fake_settings, fake_pipeline, caplog):
    caplog.set_level(logging.INFO)
    settings = Settings(rag=fake_settings, sarvam=SarvamSettings(),
                        openrouter=OpenRouterSettings(), telegram=TelegramSettings(),
                        bot=Settings.from_env({"BOT_DATABASE_URL": pg_url}).bot)
    services = await Services.open(settings, fake_pipeline)  # creates the tables
    await services.close()
    async with stuck_in_postgres(pg_url, "rate_events", "DELETE FROM rate_events") as stuck:
        services = await Services.open(settings, fake_pipeline)  # its first prune waits
        assert isinstance(services.state, SharedState)
        pruner = services.state._pruner
        assert pruner is not None
        await stuck.freeze()
        await assert_bounded(services.close(), "shared_state_prune", caplog)
        # psycopg gives up on the frozen query after its 5 s; the cancellation that arrives as
        # OperationalError then ends the loop instead of sleeping for the next prune
        assert await wait_done(pruner, PSYCOPG_CANCEL_S + 10), "the prune loop went on"
    assert pruner.cancelled()


@pytest.mark.slow
async def test_dispatcher_close_is_bounded_while_its_sweep_hangs(pg_url, caplog):
    caplog.set_level(logging.INFO)
    db = await Database.open(pg_url)
    try:
        dispatcher = ChatDispatcher(Inbox(db), "telegram", _never_called,
                                    Replicas("replica-a", lease_s=3.0, sweep_s=0.2))
        async with stuck_in_postgres(pg_url, "inbox", "UPDATE inbox") as stuck:
            await dispatcher.start()
            await stuck.freeze()
            await assert_bounded(dispatcher.aclose(), "inbox_sweep", caplog)
            sweeper = dispatcher._sweeper
            assert sweeper is not None
            assert await wait_done(sweeper, PSYCOPG_CANCEL_S + 10)
    finally:
        await db.close()


@pytest.mark.slow
async def test_a_cancelled_drain_ends_instead_of_retrying_its_chat(pg_url):
    db = await Database.open(pg_url)
    inbox = Inbox(db)
    try:
        await inbox.claim("telegram", "m1", 42, "{}")  # creates the tables, and one message
        dispatcher = ChatDispatcher(inbox, "telegram", _never_called,
                                    Replicas("replica-a", lease_s=3.0, sweep_s=60.0))
        async with stuck_in_postgres(pg_url, "inbox", "SELECT * FROM inbox") as stuck:
            dispatcher.notify(42)
            drain = dispatcher._drains[42]
            await stuck.freeze()
            drain.cancel()
            # the lock is still held: a drain that took the cancellation for a database error
            # would back off and wait on the lock again, never ending
            assert await wait_done(drain, PSYCOPG_CANCEL_S + 10), "the drain went on retrying"
            assert drain.cancelled()
    finally:
        await db.close()


@pytest.mark.slow
async def test_a_closing_dispatcher_finishes_the_answer_under_way_and_takes_no_more(pg_url):
    """SIGTERM mid-burst: the answer being written finishes (its reply needs the bot's HTTP
    client, which Telegram's post_stop keeps open until then); the chat's next messages stay
    in the inbox, untaken, for another replica."""
    db = await Database.open(pg_url)
    inbox = Inbox(db)
    started, release = asyncio.Event(), asyncio.Event()
    handled: list[str] = []

    async def handle(item) -> None:
        started.set()
        await release.wait()
        handled.append(item.message_key)
        await inbox.finish("telegram", item.message_key, "replied", None, holder="replica-a")

    try:
        for key in ("c/1", "c/2", "c/3"):
            await inbox.claim("telegram", key, 7, "{}")
        dispatcher = ChatDispatcher(inbox, "telegram", handle,
                                    Replicas("replica-a", lease_s=30.0, sweep_s=60.0))
        dispatcher.notify(7)
        await asyncio.wait_for(started.wait(), 10)
        closing = asyncio.create_task(dispatcher.aclose())
        await asyncio.sleep(0.2)
        dispatcher.notify(7)  # a late notify while closing starts nothing
        release.set()
        await asyncio.wait_for(closing, 10)
        assert handled == ["c/1"]
        left = [(i.message_key, i.status, i.claimed_by) for i in await inbox.unfinished("telegram")]
        assert left == [("c/2", "pending", None), ("c/3", "pending", None)]
    finally:
        await db.close()


async def test_a_reply_that_fails_at_shutdown_leaves_its_message_unfinished(tmp_path, caplog):
    """Telegram: PTB has stopped (``Application.running`` is false) and the reply's request
    fails: the message is not closed as answered; it stays in the inbox for the next start (or
    another replica), and one log line says so."""
    caplog.set_level(logging.INFO)
    db = await Database.open(str(tmp_path / "bot.sqlite3"))
    try:
        chat_inbox = ChannelInbox(store=Inbox(db), channel="telegram", max_age_s=60)
        claim = await chat_inbox.claim("1/2/0", 1, "{}")
        assert claim is not None
        context = SimpleNamespace(error=NetworkError("httpx.ReadError: client closed"),
                                  claim=claim, application=SimpleNamespace(running=False))
        await handlers.on_error(None, context)
        await claim.finish()
        [item] = await chat_inbox.store.unfinished("telegram")
        assert (item.message_key, item.status) == ("1/2/0", "pending")
        assert "reply_failed_at_shutdown" in caplog.text
        assert "unhandled_error" not in caplog.text
        # while running, the same failure is an ordinary one: logged, and the message closed
        claim = chat_inbox.held("1/2/0")
        context.application.running = True
        await handlers.on_error(None, context)
        await claim.finish()
        assert await chat_inbox.store.unfinished("telegram") == []
    finally:
        await db.close()


async def _never_called(item) -> None:
    raise AssertionError(f"nothing is taken while the inbox is locked: {item}")


async def test_raise_if_cancelled_turns_a_swallowed_cancellation_back_into_one():
    """Fast: a loop whose awaited call swallowed its cancellation into another error ends at
    ``raise_if_cancelled`` instead of going round again; an uncancelled loop goes on."""
    rounds = []

    async def loop() -> None:
        while True:
            rounds.append(len(rounds))
            try:
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    raise OSError("the driver's error") from None
            except OSError:
                raise_if_cancelled()
            await asyncio.sleep(0)

    task = asyncio.create_task(loop())
    await asyncio.sleep(0.01)
    task.cancel()
    assert await wait_done(task, 5.0)
    assert task.cancelled() and rounds == [0]


async def test_stop_tasks_abandons_a_task_that_ignores_its_cancellation(caplog):
    """Fast: a task that ignores cancellation is waited for ``timeout_s`` only, logged, and
    returned; a task that ends is not."""
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()

    obedient = asyncio.create_task(asyncio.sleep(10))
    task = asyncio.create_task(stubborn(), name="stubborn")
    await asyncio.sleep(0)
    start = time.monotonic()
    abandoned = await stop_tasks([task, obedient, None], "test_loop", timeout_s=0.2)
    assert abandoned == [task]
    assert obedient.cancelled()
    assert time.monotonic() - start < 10 * STOP_WAIT_S
    assert "task_abandoned what=test_loop task=stubborn" in caplog.text
    release.set()
    assert await wait_done(task, 5.0)
