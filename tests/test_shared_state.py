"""storage's shared state for replicas: the rate limit, the repeat window, the voice-note index,
inbox leases, per-chat order and named locks, each on SQLite and on PostgreSQL (``db_target``),
with concurrency checks where several ``Database`` instances stand for several replicas."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from storage import Database
from storage.backend import POSTGRESQL, SQLITE, parse_database_url, to_pyformat
from storage.errors import DatabaseOpenError
from storage.inbox import Inbox
from storage.ratelimit import RATE_ALLOWED, RateDecision, RateLimitStore
from storage.repeats import RepeatStore, SeenRepeat
from storage.voice_index import VoiceIndex, voice_key_digest


@pytest.fixture
async def db(db_target):
    async with await Database.open(db_target) as database:
        yield database


async def open_replicas(db_target, n: int) -> list[Database]:
    """``n`` Database instances on one database, as ``n`` replicas would have."""
    if isinstance(db_target, Path):
        db_target.parent.mkdir(parents=True, exist_ok=True)
        first = await Database.open(db_target)  # migrate once before the others open
        return [first] + [await Database.open(db_target) for _ in range(n - 1)]
    return list(await asyncio.gather(*(Database.open(db_target) for _ in range(n))))


def test_database_urls_pick_the_backend():
    assert parse_database_url("postgresql://bot:pw@db:5432/bot").dialect == POSTGRESQL
    assert parse_database_url("postgres://db/bot").dialect == POSTGRESQL
    assert parse_database_url("postgresql://bot:secret@db/bot").display == (
        "postgresql://bot:***@db/bot")
    assert parse_database_url("sqlite:///data/bot.sqlite3").path == Path("data/bot.sqlite3")
    assert parse_database_url("sqlite:////var/bot.sqlite3").path == Path("/var/bot.sqlite3")
    assert parse_database_url("data/bot.sqlite3").dialect == SQLITE
    assert parse_database_url(Path("x.sqlite3")).path == Path("x.sqlite3")
    with pytest.raises(ValueError, match="'mysql' is not sqlite or postgresql"):
        parse_database_url("mysql://db/bot")
    with pytest.raises(ValueError, match="names no file"):
        parse_database_url("sqlite://")


def test_placeholders_become_pyformat_outside_quotes():
    assert to_pyformat("SELECT ? WHERE a LIKE '50% ?' AND b = ?") == (
        "SELECT %s WHERE a LIKE '50%% ?' AND b = %s")
    assert to_pyformat('SELECT 1 % 2, "col?" FROM t') == 'SELECT 1 %% 2, "col?" FROM t'


# --- rate limit ---------------------------------------------------------------------------

async def test_rate_limit_allows_max_n_then_notices_once_then_drops(db):
    limiter = RateLimitStore(db, max_n=3, window_s=30.0)
    assert [await limiter.acquire("u1", now_s=100.0 + i) for i in range(3)] == [RATE_ALLOWED] * 3
    assert await limiter.acquire("u1", now_s=104.0) == RateDecision(wait_s=26, is_notice=True)
    assert await limiter.acquire("u1", now_s=110.0) == RateDecision(wait_s=20, is_notice=False)
    assert await limiter.acquire("u2", now_s=110.0) == RATE_ALLOWED  # keys are independent
    assert await limiter.peek_wait_s("u1", now_s=129.5) == 1
    assert await limiter.acquire("u1", now_s=130.5) == RATE_ALLOWED  # the first event left


async def test_rate_limit_peek_records_nothing_and_zero_max_allows_all(db):
    limiter = RateLimitStore(db, max_n=1, window_s=10.0)
    for _ in range(3):
        assert await limiter.peek_wait_s("u", now_s=5.0) == 0
    assert (await limiter.acquire("u", now_s=5.0)).is_allowed
    assert await limiter.peek_wait_s("u", now_s=6.0) == 9
    off = RateLimitStore(db, max_n=0, window_s=10.0)
    assert all([(await off.acquire("u", now_s=6.0)).is_allowed for _ in range(5)])


async def test_rate_limit_sender_who_heeded_the_notice_gets_a_new_one(db):
    limiter = RateLimitStore(db, max_n=1, window_s=10.0)
    assert (await limiter.acquire("u", now_s=0.0)).is_allowed
    assert (await limiter.acquire("u", now_s=1.0)).is_notice
    assert (await limiter.acquire("u", now_s=10.5)).is_allowed  # stopped after the notice
    assert await limiter.acquire("u", now_s=11.0) == RateDecision(wait_s=10, is_notice=True)
    # kept trying: silent until allowed again
    assert not (await limiter.acquire("u", now_s=12.0)).is_notice
    assert await limiter.acquire("u", now_s=20.0) == RateDecision(wait_s=1, is_notice=False)
    assert (await limiter.acquire("u", now_s=20.6)).is_allowed


async def test_rate_limit_prune_drops_what_left_the_window(db):
    limiter = RateLimitStore(db, max_n=1, window_s=10.0)
    await limiter.acquire("a", now_s=0.0)
    await limiter.acquire("a", now_s=1.0)  # refused: a rate_limits row
    await limiter.acquire("b", now_s=5.0)
    assert await limiter.prune(now_s=12.0) == 2  # a's event and a's notice; b's event stays
    assert await limiter.peek_wait_s("b", now_s=12.0) == 3


async def test_rate_limit_is_exact_under_concurrent_acquires_from_several_replicas(db_target):
    replicas = await open_replicas(db_target, 3)
    try:
        limiters = [RateLimitStore(r, max_n=5, window_s=60.0) for r in replicas]
        verdicts = await asyncio.gather(*(
            limiters[i % 3].acquire("hot", now_s=1000.0 + i / 100) for i in range(30)))
        assert sum(v.is_allowed for v in verdicts) == 5
        assert sum(v.is_notice for v in verdicts) == 1
        assert await limiters[0].peek_wait_s("hot", now_s=1001.0) in (59, 60)
    finally:
        for r in replicas:
            await r.close()


# --- repeat window ------------------------------------------------------------------------

async def test_repeat_is_counted_within_the_window_and_new_after_it(db):
    repeats = RepeatStore(db, window_s=30.0)
    assert await repeats.check("telegram:1", "m1", "what is x", now_s=100.0) is None
    assert await repeats.check("telegram:1", "m2", "what is x", now_s=105.0) == SeenRepeat(
        "m1", 5.0, 1)
    assert (await repeats.check("telegram:1", "m3", "what is x", now_s=106.0)).n_repeat == 2
    assert await repeats.check("whatsapp:1", "w1", "what is x", now_s=106.0) is None  # other chat
    assert await repeats.check("telegram:1", "m4", "what is x", now_s=131.0) is None  # expired


async def test_the_same_message_again_is_not_its_own_repeat_and_forget_clears(db):
    repeats = RepeatStore(db, window_s=30.0)
    assert await repeats.check("c", "m1", "q", now_s=0.0) is None
    assert await repeats.check("c", "m1", "q", now_s=1.0) is None  # an edit or a replay
    await repeats.forget("c", "q")
    assert await repeats.check("c", "m2", "q", now_s=2.0) is None
    assert await RepeatStore(db, window_s=0).check("c", "m3", "q", now_s=2.0) is None  # off
    assert await repeats.prune(now_s=100.0) == 1


async def test_only_the_chats_last_question_is_repeated_and_forget_chat_clears_the_chat(db):
    """Issue 44: "and a big one?" after another question means something else."""
    repeats = RepeatStore(db, window_s=30.0)
    assert await repeats.check("c", "m1", "and a big one", now_s=0.0) is None
    assert await repeats.check("d", "n1", "and a big one", now_s=0.5) is None  # another chat
    assert await repeats.check("c", "m2", "how much is a melon", now_s=1.0) is None
    assert await repeats.check("c", "m3", "and a big one", now_s=2.0) is None  # one in between
    assert (await repeats.check("c", "m4", "and a big one", now_s=3.0)).n_repeat == 1
    await repeats.forget_chat("c")
    assert await repeats.check("c", "m5", "and a big one", now_s=4.0) is None
    assert (await repeats.check("d", "n2", "and a big one", now_s=5.0)).n_repeat == 1


async def test_two_replicas_checking_one_question_at_once_see_one_new_one_repeat(db_target):
    replicas = await open_replicas(db_target, 2)
    try:
        stores = [RepeatStore(r, window_s=30.0) for r in replicas]
        for round_ in range(5):
            seen = await asyncio.gather(
                stores[0].check("c", f"a{round_}", f"q{round_}", now_s=10.0),
                stores[1].check("c", f"b{round_}", f"q{round_}", now_s=10.0))
            assert sorted(s is None for s in seen) == [False, True]
    finally:
        for r in replicas:
            await r.close()


# --- voice-note index ---------------------------------------------------------------------

async def test_voice_index_finds_marks_used_and_evicts_least_recently_used(db):
    now = [0.0]
    index = VoiceIndex(db, clock=lambda: now[0])
    keys = [voice_key_digest(f"answer {i}", "hi", "anushka", "bulbul:v3") for i in range(3)]
    assert len(set(keys)) == 3 and len(keys[0]) == 64
    for i, key in enumerate(keys):
        now[0] = float(i)
        await index.put(key, f"voice/{i}.ogg", duration_s=1.5, n_bytes=100)
    now[0] = 10.0
    assert (await index.get(keys[0])).location == "voice/0.ogg"  # now the most recently used
    assert await index.get("nope") is None
    assert await index.n_bytes() == 300
    gone = await index.evict(max_bytes=150)
    assert [e.location for e in gone] == ["voice/1.ogg", "voice/2.ogg"]
    assert await index.n_bytes() == 100 and await index.get(keys[1]) is None


# --- the chat layer's shared state (bot.chat.state.SharedState) ----------------------------

async def test_shared_chat_state_is_one_limit_one_window_and_one_voice_cache_for_replicas(
        db_target, tmp_path):
    """Two replicas' ``SharedState`` on one database, through the ``ChatState`` interface the
    chat layer calls: senders and chats keyed by channel and id, a question one replica saw is
    a repeat on the other, a voice note one replica made is heard from the other's cache."""
    from bot.chat.state import SharedState
    from bot.chat.types import Asker
    from bot.chat.voice_cache import VoiceAudio, VoiceCache

    replicas = await open_replicas(db_target, 2)
    states = [SharedState(RateLimitStore(r, max_n=1, window_s=60.0),
                          RepeatStore(r, window_s=30.0), VoiceIndex(r), tmp_path / "voices",
                          voice_max_bytes=1000, voice_cache=VoiceCache(1000))
              for r in replicas]
    a, b = states
    telegram = Asker("telegram", 42, user_id=42, message_id=1)
    whatsapp = Asker("whatsapp", 42, user_id=42, message_key="wamid.1")
    try:
        assert (await a.acquire(telegram)).is_allowed
        assert (await b.acquire(whatsapp)).is_allowed  # another channel: another sender
        assert await b.acquire(telegram) == RateDecision(wait_s=60, is_notice=True)
        assert all([(await b.acquire(Asker("console", 0))).is_allowed for _ in range(3)])

        assert await a.check_repeat(telegram, "What is X?") is None
        assert await b.check_repeat(telegram, "what is x") is None  # the same message again
        assert await b.check_repeat(whatsapp, "what is x") is None  # another chat
        repeat = await b.check_repeat(Asker("telegram", 42, user_id=42, message_id=2),
                                      "what is x")
        assert (repeat.first_message_id, repeat.n_repeat) == (1, 1)
        await a.forget_repeat(telegram, "WHAT IS X")
        assert await b.check_repeat(Asker("telegram", 42, user_id=42, message_id=3),
                                    "what is x") is None

        key, audio = ("answer", "hi-IN", "shubh", "bulbul:v3"), VoiceAudio(b"OggS" * 10, 1.5)
        assert await b.cached_voice(key) is None
        await a.keep_voice(key, audio)
        [file] = (tmp_path / "voices").iterdir()
        assert file.read_bytes() == audio.ogg
        assert len(b.voice_cache) == 0 and await b.cached_voice(key) == audio  # from the file
        assert len(b.voice_cache) == 1  # and now in b's memory in front
        file.unlink()
        other = ("other", "hi-IN", "shubh", "bulbul:v3")
        await a.keep_voice(other, audio)
        next(iter((tmp_path / "voices").iterdir())).unlink()  # gone: a miss, not an error
        assert await b.cached_voice(other) is None
    finally:
        for r in replicas:
            await r.close()


# --- named locks --------------------------------------------------------------------------

async def test_hold_lock_lets_one_holder_at_a_time_per_key(db_target):
    replicas = await open_replicas(db_target, 2)
    inside: list[str] = []
    log: list[tuple[str, str]] = []

    async def hold(db: Database, key: str, who: str) -> None:
        async with db.backend.hold_lock(key):
            inside.append(who)
            log.append(("in", who))
            assert [w for w in inside if w.startswith(key)] == [who]
            await asyncio.sleep(0.05)
            inside.remove(who)

    try:
        # on SQLite the lock is per process: both holders go through the first replica there
        pick = (lambda i: replicas[i % 2]) if replicas[0].dialect == POSTGRESQL else (
            lambda i: replicas[0])
        await asyncio.gather(*(hold(pick(i), f"chat{i % 2}", f"chat{i % 2}-{i}")
                               for i in range(6)))
        assert len(log) == 6
    finally:
        for r in replicas:
            await r.close()


# --- inbox leases and per-chat order ------------------------------------------------------

async def claim_messages(db: Database, chat_id: int, keys: list[str]) -> None:
    inbox = Inbox(db)
    for key in keys:
        assert await inbox.claim("telegram", key, chat_id, "{}")


async def test_a_taken_message_is_taken_over_only_after_its_lease_expires(db):
    inbox = Inbox(db)
    await claim_messages(db, 1, ["1/1/0"])
    assert await inbox.take("telegram", "1/1/0", "replica-a", lease_s=30, now_s=100.0)
    assert not await inbox.take("telegram", "1/1/0", "replica-b", lease_s=30, now_s=110.0)
    assert await inbox.takeable(now_s=110.0) == []
    assert await inbox.renew("telegram", "1/1/0", "replica-a", lease_s=30, now_s=120.0)
    assert not await inbox.take("telegram", "1/1/0", "replica-b", lease_s=30, now_s=140.0)
    # replica-a stalls past its lease: b takes over, a may no longer renew or send
    [stale] = await inbox.takeable(now_s=151.0)
    assert (stale.message_key, stale.claimed_by) == ("1/1/0", "replica-a")
    assert await inbox.take("telegram", "1/1/0", "replica-b", lease_s=30, now_s=151.0)
    assert not await inbox.renew("telegram", "1/1/0", "replica-a", lease_s=30, now_s=152.0)
    assert not await inbox.mark_sending("telegram", "1/1/0", holder="replica-a")
    assert await inbox.mark_sending("telegram", "1/1/0", holder="replica-b")
    assert not await inbox.take("telegram", "1/1/0", "replica-c", lease_s=30, now_s=999.0)
    assert await inbox.finish("telegram", "1/1/0", "replied", decision_id=None)
    assert (await inbox.get("telegram", "1/1/0")).claimed_by == "replica-b"


async def test_a_released_message_can_be_taken_at_once(db):
    inbox = Inbox(db)
    await claim_messages(db, 1, ["1/1/0"])
    assert await inbox.take("telegram", "1/1/0", "a", lease_s=30, now_s=0.0)
    assert not await inbox.release("telegram", "1/1/0", "b")
    assert await inbox.release("telegram", "1/1/0", "a")
    assert await inbox.take("telegram", "1/1/0", "b", lease_s=30, now_s=1.0)


async def test_one_chat_is_handed_out_in_order_one_message_at_a_time(db):
    inbox = Inbox(db)
    await claim_messages(db, 7, ["7/1/0", "7/2/0"])
    await claim_messages(db, 8, ["8/1/0"])
    first = await inbox.take_next_in_chat("telegram", 7, "a", lease_s=30, now_s=0.0)
    assert (first.message_key, first.claimed_by) == ("7/1/0", "a")
    assert await inbox.take_next_in_chat("telegram", 7, "b", lease_s=30, now_s=1.0) is None
    other = await inbox.take_next_in_chat("telegram", 8, "b", lease_s=30, now_s=1.0)
    assert other.message_key == "8/1/0"  # another chat is not held up
    assert await inbox.mark_sending("telegram", "7/1/0", holder="a")
    assert await inbox.take_next_in_chat("telegram", 7, "b", lease_s=30, now_s=2.0) is None
    await inbox.finish("telegram", "7/1/0", "replied")
    second = await inbox.take_next_in_chat("telegram", 7, "b", lease_s=30, now_s=3.0)
    assert second.message_key == "7/2/0"
    # b dies with it: after the lease, a takes the chat's message over
    assert await inbox.take_next_in_chat("telegram", 7, "a", lease_s=30, now_s=20.0) is None
    again = await inbox.take_next_in_chat("telegram", 7, "a", lease_s=30, now_s=34.0)
    assert (again.message_key, again.claimed_by) == ("7/2/0", "a")


@pytest.mark.slow
@pytest.mark.postgres
async def test_a_take_overtaken_by_the_holders_send_does_not_take_the_message(pg_url):
    """Issue 30 (one question answered twice by two replicas, beside a CPU hog): replica b
    reads a's message as ``pending`` with a's lease run out; a marks it ``sending`` (its late
    reply leaves) before b's UPDATE lands. b must not get it, or b would answer it too: a's
    ``sending`` row, taken over by b, let b's own send through. The race is made certain here:
    a row lock held by "a" stops b's UPDATE until a's send is committed."""
    import psycopg

    async with await Database.open(pg_url) as db:
        inbox = Inbox(db)
        await claim_messages(db, 7, ["7/1/0"])
        assert await inbox.take("telegram", "7/1/0", "a", lease_s=3, now_s=0.0)  # long expired
        async with await psycopg.AsyncConnection.connect(pg_url) as a_conn, \
                await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as watcher:
            async with a_conn.transaction():
                await a_conn.execute("SELECT id FROM inbox WHERE message_key = '7/1/0' "
                                     "FOR UPDATE")
                b_take = asyncio.create_task(
                    inbox.take_next_in_chat("telegram", 7, "b", lease_s=3))

                async def b_waits_on_the_row() -> bool:
                    cursor = await watcher.execute(
                        "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND datname = current_database()")
                    return (await cursor.fetchone())[0] == 1

                for _ in range(500):
                    if await b_waits_on_the_row() or b_take.done():
                        break
                    await asyncio.sleep(0.01)
                assert not b_take.done(), "b's take did not reach its UPDATE"
                await a_conn.execute(  # Inbox.mark_sending("telegram", "7/1/0", holder="a")
                    "UPDATE inbox SET status = 'sending' WHERE message_key = '7/1/0' AND "
                    "status = 'pending' AND claimed_by = 'a'")
            assert await asyncio.wait_for(b_take, 10) is None
        item = await inbox.get("telegram", "7/1/0")
        assert (item.status, item.claimed_by) == ("sending", "a")
        # so b's send is refused: the message is a's
        assert not await inbox.mark_sending("telegram", "7/1/0", holder="b")


async def test_replicas_taking_one_message_at_once_exactly_one_wins(db_target):
    replicas = await open_replicas(db_target, 3)
    try:
        await claim_messages(replicas[0], 1, [f"1/{i}/0" for i in range(8)])
        for i in range(8):
            wins = await asyncio.gather(*(
                Inbox(r).take("telegram", f"1/{i}/0", f"replica-{n}", lease_s=30, now_s=5.0)
                for n, r in enumerate(replicas)))
            assert sum(wins) == 1
    finally:
        for r in replicas:
            await r.close()


async def test_replicas_answer_one_chat_in_the_order_received_never_two_at_once(db_target):
    replicas = await open_replicas(db_target, 3)
    keys = [f"9/{i}/0" for i in range(12)]
    answered: list[str] = []
    busy: list[str] = []

    async def worker(db: Database, name: str) -> None:
        inbox = Inbox(db)
        while len(answered) < len(keys):
            item = await inbox.take_next_in_chat("telegram", 9, name, lease_s=30)
            if item is None:
                await asyncio.sleep(0.001)
                continue
            busy.append(name)
            assert len(busy) == 1, busy  # nobody else is answering this chat
            answered.append(item.message_key)
            await asyncio.sleep(0.002)
            busy.remove(name)
            assert await inbox.mark_sending("telegram", item.message_key, holder=name)
            assert await inbox.finish("telegram", item.message_key, f"replied by {name}")

    try:
        await claim_messages(replicas[0], 9, keys)
        await asyncio.wait_for(asyncio.gather(*(
            worker(r, f"replica-{n}") for n, r in enumerate(replicas))), timeout=60)
        assert answered == keys
    finally:
        for r in replicas:
            await r.close()


async def test_an_unreachable_postgresql_server_is_a_database_open_error_without_the_password():
    with pytest.raises(DatabaseOpenError, match="cannot open the database") as err:
        await Database.open("postgresql://bot:secret@127.0.0.1:1/bot")
    assert err.value.path == "postgresql://bot:***@127.0.0.1:1/bot"
    assert "secret" not in str(err.value)


async def test_replicas_prune_the_rows_of_senders_and_chats_that_never_return(db, tmp_path):
    """Each question deletes only its own sender's and chat's old rows; the pruning loop that
    Services starts on PostgreSQL (bot.chat.state.SharedState.prune_forever) deletes the rest."""
    from bot.chat.state import SharedState

    async def n_rows() -> tuple[int, int, int]:
        return tuple([(await db._fetchone(f"SELECT COUNT(*) FROM {table}", ()))[0]
                      for table in ("rate_events", "rate_limits", "repeats")])

    limits = RateLimitStore(db, max_n=1, window_s=10.0, clock=lambda: 100.0)
    repeats = RepeatStore(db, window_s=30.0, clock=lambda: 100.0)
    await limits.acquire("gone", now_s=0.0)
    await limits.acquire("gone", now_s=1.0)  # refused: its notice is a rate_limits row
    await repeats.check("telegram:7", "m1", "what is x", now_s=0.0)
    await limits.acquire("active", now_s=95.0)  # inside the window at 100 s: kept
    assert await n_rows() == (2, 1, 1)
    state = SharedState(limits, repeats, VoiceIndex(db), tmp_path, 0)
    pruner = asyncio.create_task(state.prune_forever(every_s=3600))
    try:
        for _ in range(500):
            if await n_rows() == (1, 0, 0):
                break
            await asyncio.sleep(0.01)
        assert await n_rows() == (1, 0, 0)
        assert await limits.peek_wait_s("active", now_s=100.0) == 5
    finally:
        pruner.cancel()
