"""The operator's dashboard over a decision log filled by real bot runs (tests/dashboard_runs.py:
Telegram, console and WhatsApp against their stand-ins, answering from the fake pipeline), over
HTTP on 127.0.0.1: /metrics parsed with prometheus_client's parser, filters, 400s, access
control, hashed ids, the CSV export, the read-only reader, mounting as a sub-app. The browser
tests are in tests/test_dashboard_browser.py (slow).

Every test over a database runs on SQLite and on PostgreSQL (``bot_db`` and ``db_target`` are
parametrised; the PostgreSQL cases are ``slow`` and ``postgres``, in the session's throwaway
cluster), where the bots write through ``BOT_DATABASE_URL`` as replicas do; and one test
records the same log on both and compares every page and ``/metrics`` byte for byte."""

from __future__ import annotations

import asyncio
import csv
import importlib
import io
import json
import logging
import re
import sys
from base64 import b64encode
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from bot.cli import main as bot_main
from bot.dashboard import DashboardConfigError, DashboardSettings, create_app
from bot.dashboard.timings import SETTLE_S, StageTimings
from rag.types import Reason, ReasonCode, Result, Stage, Status, Trace
from standins.postgres import free_port
from storage.backend import POSTGRESQL, SQLITE, DatabaseUrl, driver_errors
from storage.db import Database
from storage.errors import DatabaseOpenError
from storage.inbox import Inbox
from storage.reader import DecisionFilter, DecisionReader
from tests.conftest import ROOT, needs_tools
from tests.dashboard_runs import BACKENDS, PM, SCRIPT, WA_ID, XBOX, logged_database
from tests.pgcluster import query_rows

pytestmark = needs_tools("espeak-ng", "ffmpeg")

TOKEN = "dashboard-test-token"
NO_INDEX = ROOT / "tests" / "no-such-index"


@pytest.fixture(scope="module", params=BACKENDS)
def bot_db(request, tmp_path_factory, fake_settings, fake_pipeline) -> Path | str:
    """The decision log of :data:`tests.dashboard_runs.SCRIPT`, recorded by the real bots: an
    SQLite file, or a PostgreSQL database's URL."""
    return logged_database(request, tmp_path_factory, fake_settings, fake_pipeline,
                           "dashboard_http")


@asynccontextmanager
async def client(app: web.Application) -> AsyncIterator[TestClient]:
    async with TestClient(TestServer(app, host="127.0.0.1")) as http:
        yield http


def settings_for(target: Path | str, **changes) -> DashboardSettings:
    """Settings over ``target``: an SQLite file (``db_path``) or a URL (``database_url``)."""
    database = {"db_path": target} if isinstance(target, Path) else {"database_url": target}
    return replace(DashboardSettings(**database, index_dir=NO_INDEX), **changes)


def rows_of(html: str) -> list[dict[str, str]]:
    """The questions list's rows as their data-* attributes."""
    return [dict(re.findall(r'data-(\w+)="([^"]*)"', tr))
            for tr in re.findall(r"<tr data-id=[^>]*>", html)]


# -------------------------------------------------------------------------------- metrics


async def test_metrics_parse_and_match_the_decision_log_after_bot_runs(bot_db):
    async with client(create_app(settings_for(bot_db))) as http:
        response = await http.get("/metrics")
        text = await response.text()
    assert response.status == 200 and response.headers["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(text)}

    questions = Counter()
    for s in families["voice_rag_questions"].samples:
        if s.name == "voice_rag_questions_total":
            labels = s.labels
            questions[(labels["channel"], labels["lang"], labels["status"],
                       labels["reason"])] += int(s.value)
    assert questions == Counter((ch, lang, st, reason) for ch, _src, lang, st, reason in SCRIPT)
    # and the log itself says the same
    by_status = Counter(dict(query_rows(bot_db, "SELECT status, COUNT(*) FROM decisions "
                                                "GROUP BY status")))
    traces = [json.loads(t) for (t,) in query_rows(bot_db, "SELECT trace FROM decisions")]
    assert by_status == Counter(status for *_, status, _reason in SCRIPT)
    assert sum(questions.values()) == by_status.total() == len(SCRIPT)

    stage_counts = Counter(s["name"] for trace in traces for s in trace)
    histogram = {s.labels["stage"]: s.value for s in families[
        "voice_rag_stage_duration_seconds"].samples if s.name.endswith("_count")}
    assert histogram == stage_counts
    assert {"relevance_guard", "speech_to_text", "text_to_speech"} <= set(histogram)
    inf = [s for s in families["voice_rag_stage_duration_seconds"].samples
           if s.name.endswith("_bucket") and s.labels["le"] == "+Inf"]
    assert {s.labels["stage"]: s.value for s in inf} == stage_counts
    parts = {s.labels["part"]: s.value for s in families[
        "voice_rag_question_duration_seconds"].samples if s.name.endswith("_count")}
    assert parts["pipeline"] == len(SCRIPT) and parts["stt"] == 1  # one voice note heard

    errors = {(s.labels["service"], s.labels["stage"], s.labels["kind"]): s.value
              for s in families["voice_rag_speech_errors"].samples
              if s.name == "voice_rag_speech_errors_total"}
    assert errors == {("stt", "speech_to_text", "stt_down"): 1,
                      ("tts", "text_to_speech", "server_error"): 1}
    backlog = {(s.labels["channel"], s.labels["status"]): s.value
               for s in families["voice_rag_inbox_backlog"].samples}
    assert backlog == {("telegram", "pending"): 0, ("telegram", "sending"): 0,
                       ("whatsapp", "pending"): 0, ("whatsapp", "sending"): 0}


# ---------------------------------------------------------------------------------- pages


async def test_list_filters_by_status_language_channel_source_and_date_and_pages(bot_db):
    today = datetime.now(UTC).date()
    async with client(create_app(settings_for(bot_db))) as http:
        async def rows(query: str) -> list[dict[str, str]]:
            response = await http.get("/" + query)
            assert response.status == 200, await response.text()
            return rows_of(await response.text())

        everything = await rows("")
        assert [r["channel"] for r in everything] == [ch for ch, *_ in reversed(SCRIPT)]
        refused = await rows("?status=refused-no-match")
        assert len(refused) == 3 and {r["status"] for r in refused} == {"refused-no-match"}
        assert {r["channel"] for r in await rows("?channel=whatsapp")} == {"whatsapp"}
        assert [r["lang"] for r in await rows("?lang=hi")] == ["hi"]
        assert len(await rows("?source=voice&channel=telegram")) == 2
        assert len(await rows(f"?from={today}&to={today}")) == len(SCRIPT)
        assert await rows(f"?to={today - timedelta(days=1)}") == []
        page_2 = await rows("?per=4&page=2")
        assert [r["id"] for r in page_2] == [r["id"] for r in everything[4:8]]
        html = await (await http.get("/?per=4&page=2&status=")).text()
        assert "page 2 of 3" in html and 'href="/?per=4&amp;page=3"' in html
        assert "No decision matches." in await (await http.get("/?lang=te&channel=cli")).text()


async def test_decision_page_shows_the_chain_with_milliseconds_and_citations(bot_db):
    [(decision_id,)] = query_rows(
        bot_db, "SELECT id FROM decisions WHERE source = 'voice' AND status = 'answered'")
    async with client(create_app(settings_for(bot_db))) as http:
        html = await (await http.get(f"/decision/{decision_id}")).text()
    for stage in ("voice_checks", "download", "transcode", "speech_to_text", "relevance_guard",
                  "grounding_guard", "text_to_speech"):
        assert re.search(rf"<td class=\"nowrap\">{stage}</td>.*?<td class=\"num\">\d+\.\d</td>",
                         html, re.S), stage
    assert "failed" in html and "server_error" in html  # the spoken reply's failure
    assert re.search(r"<b>en-\d+-\d+</b> <span class=\"muted\">en · score 0\.\d{3}", html)
    assert XBOX in html


async def test_refusals_scores_and_latency_pages_render(bot_db):
    async with client(create_app(settings_for(bot_db))) as http:
        refusals = await (await http.get("/refusals")).text()
        scores = await (await http.get("/scores")).text()
        latency = await (await http.get("/latency")).text()
    today = datetime.now(UTC).date().isoformat()
    assert f"<b>{today}</b><br><span class=\"muted\">6 in all</span>" in refusals
    assert re.search(r"<td>below_floor</td><td>en</td><td class=\"num\">3</td>", refusals)
    assert scores.count("<svg") == 4  # en, hi, gu, te: each with its floor drawn
    assert scores.count("floor 0.250</text>") == 4
    assert "<td>relevance_guard</td>" in latency and "<td>pipeline_total</td>" in latency
    assert "speech-to-text 1, text-to-speech 1" in latency


async def test_csv_export_lists_refused_questions_with_best_passage_and_score(bot_db):
    async with client(create_app(settings_for(bot_db))) as http:
        response = await http.get("/export/refused.csv")
        body = await response.text()
    assert response.headers["Content-Disposition"].startswith("attachment")
    rows = list(csv.DictReader(io.StringIO(body)))
    assert [(r["channel"], r["reason"]) for r in rows] == [
        ("whatsapp", "injection"), ("whatsapp", "below_floor"), ("console", "below_floor"),
        ("telegram", "unsupported_language"), ("telegram", "too_short"),
        ("telegram", "below_floor")]
    for row in rows:
        if row["reason"] == "below_floor":  # retrieval ran: its best passage and score
            assert row["question"] == PM and re.fullmatch(r"en-\d+-\d+", row["best_passage_id"])
            assert 0 < float(row["best_score"]) < float(row["floor"]) == 0.25
        else:  # refused by the input guard, before retrieval
            assert row["best_passage_id"] == row["best_score"] == row["top_score"] == ""


async def test_export_fills_the_best_passage_text_from_the_index(bot_db, fake_index_dir):
    async with client(create_app(settings_for(bot_db, index_dir=fake_index_dir))) as http:
        rows = list(csv.DictReader(io.StringIO(await (await http.get(
            "/export/refused.csv")).text())))
    assert all(len(r["best_passage_text"]) > 20 for r in rows if r["best_passage_id"])


@pytest.mark.parametrize(("path", "message"), [
    ("/?status=maybe", "status 'maybe' is not one of answered, hedged, refused-bad-input"),
    ("/?lang=fr", "lang 'fr' is not one of en, hi, gu, te"),
    ("/?channel=sms", "channel 'sms' is not one of telegram, whatsapp, web, console, cli"),
    ("/?from=2026-13-01", "from must be a date as YYYY-MM-DD (UTC), got '2026-13-01'"),
    ("/?from=2026-12-02&to=2026-12-01", "from 2026-12-02 is after to 2026-12-01"),
    ("/?page=0", "page must be a whole number from 1 to 1000000, got '0'"),
    ("/?per=ten", "per must be a whole number from 1 to 1000, got 'ten'"),
    ("/?per=5000", "per must be a whole number from 1 to 1000, got '5000'"),
    ("/?sort=id", "unknown query parameter 'sort'"),
    ("/decision/abc", "decision id must be a whole number, got 'abc'"),
    ("/refusals?days=-1", "days must be a whole number from 1 to 366"),
    ("/metrics?x=1", "unknown query parameter 'x'; this page takes no query parameters"),
])
async def test_bad_query_parameters_get_400_with_a_clear_message(bot_db, path, message):
    async with client(create_app(settings_for(bot_db))) as http:
        response = await http.get(path)
        body = await response.text()
    assert response.status == 400
    assert message.replace("'", "&#39;") in body
    assert "Traceback" not in body


async def test_unknown_decision_is_404(bot_db):
    async with client(create_app(settings_for(bot_db))) as http:
        response = await http.get("/decision/999999")
        assert response.status == 404 and "no decision with id 999999" in await response.text()


# ----------------------------------------------------------------------------- access


async def test_exposed_dashboard_answers_401_without_the_token(bot_db):
    app = create_app(settings_for(bot_db, host="0.0.0.0", token=TOKEN))
    async with client(app) as http:
        for path in ("/", "/metrics", "/export/refused.csv", "/decision/1"):
            response = await http.get(path)
            assert response.status == 401, path
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
            assert "Recent questions" not in await response.text()
        wrong = await http.get("/", headers={"Authorization": "Bearer nope"})
        assert wrong.status == 401
        bearer = await http.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert bearer.status == 200
        assert (await http.get("/?token=nope", allow_redirects=False)).status == 401

        first = await http.get(f"/?status=answered&token={TOKEN}", allow_redirects=False)
        assert first.status == 303 and first.headers["Location"] == "/?status=answered"
        cookie = first.cookies["voice_rag_dashboard"]
        assert cookie["httponly"] and cookie["samesite"] == "Strict" and TOKEN not in cookie.value
        then = await http.get("/?status=answered")  # the client keeps the cookie
        assert then.status == 200 and "Recent questions" in await then.text()


async def test_basic_auth_with_user_and_password(bot_db):
    app = create_app(settings_for(bot_db, host="0.0.0.0", user="ops", password="s3cret"))
    good = "Basic " + b64encode(b"ops:s3cret").decode()
    bad = "Basic " + b64encode(b"ops:guess").decode()
    async with client(app) as http:
        refused = await http.get("/")
        assert refused.status == 401 and refused.headers["WWW-Authenticate"].startswith("Basic")
        assert (await http.get("/", headers={"Authorization": bad})).status == 401
        assert (await http.get("/", headers={"Authorization": "Basic !!"})).status == 401
        assert (await http.get("/", headers={"Authorization": good})).status == 200


async def test_loopback_needs_no_token(bot_db):
    async with client(create_app(settings_for(bot_db))) as http:
        assert (await http.get("/")).status == 200


def test_exposure_without_a_token_or_a_missing_database_does_not_start(tmp_path, capsys):
    db_path = tmp_path / "bot.sqlite3"
    for host in ("0.0.0.0", "192.168.1.5", "dashboard.example.org"):
        with pytest.raises(DashboardConfigError, match="set BOT_DASHBOARD_TOKEN"):
            create_app(settings_for(db_path, host=host))
    with pytest.raises(DashboardConfigError, match="set BOT_DASHBOARD_TOKEN"):
        create_app(settings_for(db_path), is_exposed=True)  # mounted in the webhook server
    assert bot_main(["dashboard", "--host", "0.0.0.0", "--db", str(db_path)]) == 2
    assert "error: the dashboard would be reachable beyond this machine (host 0.0.0.0): set " \
           "BOT_DASHBOARD_TOKEN" in capsys.readouterr().err
    assert bot_main(["dashboard", "--port", "0", "--db", str(db_path)]) == 2
    assert "cannot read the database" in capsys.readouterr().err and not db_path.exists()


async def test_hashed_ids_hide_chat_numbers(bot_db):
    settings = settings_for(bot_db, hash_ids=True, hash_key="k")
    async with client(create_app(settings)) as http:
        listing = await (await http.get("/")).text()
        whatsapp = rows_of(await (await http.get("/?channel=whatsapp")).text())[0]["id"]
        detail = await (await http.get(f"/decision/{whatsapp}")).text()
    assert WA_ID not in listing and WA_ID not in detail and ">4242<" not in listing
    assert re.search(r"chat [0-9a-f]{10} · user [0-9a-f]{10}", detail)
    async with client(create_app(replace(settings, hash_ids=False))) as http:
        assert WA_ID in await (await http.get(f"/decision/{whatsapp}")).text()


async def test_mounted_as_a_sub_app_links_and_cookie_stay_under_its_prefix(bot_db):
    parent = web.Application()

    async def webhook(request: web.Request) -> web.Response:
        return web.Response(text="hook")

    parent.router.add_get("/webhook", webhook)
    parent.add_subapp("/dashboard", create_app(settings_for(bot_db, token=TOKEN),
                                               is_exposed=True))
    async with client(parent) as http:
        assert (await http.get("/dashboard/")).status == 401
        assert (await http.get("/webhook")).status == 200
        first = await http.get(f"/dashboard/scores?token={TOKEN}", allow_redirects=False)
        assert first.headers["Location"] == "/dashboard/scores"
        assert first.cookies["voice_rag_dashboard"]["path"] == "/dashboard"
        html = await (await http.get("/dashboard/?per=2")).text()
    assert 'href="/dashboard/refusals"' in html and 'href="/dashboard/decision/' in html
    assert 'href="/dashboard/?per=2&amp;page=2"' in html


# ----------------------------------------------------------------------------- reading


async def test_reader_refuses_a_missing_file_or_one_that_is_not_a_database(tmp_path):
    missing = tmp_path / "none.sqlite3"
    with pytest.raises(DatabaseOpenError, match="no such file"):
        await DecisionReader.open(missing)
    assert not missing.exists()
    not_db = tmp_path / "notes.sqlite3"
    not_db.write_text("not a database")
    with pytest.raises(DatabaseOpenError, match="not a database"):
        await DecisionReader.open(not_db)
    assert not_db.read_text() == "not a database"


async def test_reader_refuses_a_postgresql_database_without_the_bots_tables(pg_url):
    with pytest.raises(DatabaseOpenError, match="no decisions table"):
        await DecisionReader.open(pg_url)
    assert query_rows(pg_url, "SELECT COUNT(*) FROM information_schema.tables WHERE "
                              "table_schema = 'public'") == [(0,)]  # nothing created


async def test_reader_is_read_only_and_never_blocks_the_bot(db_target):
    async with await Database.open(db_target) as db:
        await db.record_decision("telegram", 7, 1, 7, "text",
                                 Result(Status.ANSWERED, "q", "en", answer="a"))
        async with await DecisionReader.open(db_target) as reader:
            for sql in ("DELETE FROM decisions", "UPDATE decisions SET query = 'x'",
                        "CREATE TABLE x (y TEXT)"):
                with pytest.raises(driver_errors(), match="readonly|read-only"):
                    await reader.backend.fetchall(sql)
            # a read transaction in progress (it has read rows) does not stop the bot's commit
            async with reader.backend.session() as tx:
                await tx.execute("BEGIN")
                assert (await tx.fetchone("SELECT COUNT(*) FROM decisions"))[0] == 1
                await asyncio.wait_for(db.record_decision(
                    "telegram", 7, 2, 7, "text",
                    Result(Status.ERROR, "q2", "en", message="boom")), 2)
                await tx.rollback()
            page = await reader.decisions(DecisionFilter())
    assert [r.query for r in page.rows] == ["q2", "q"]
    assert [r.channel for r in page.rows] == ["telegram", "telegram"]


async def test_settings_from_environment(tmp_path):
    settings = DashboardSettings.from_env({
        "BOT_DB_PATH": str(tmp_path / "x.sqlite3"), "BOT_DASHBOARD_HASH_IDS": "yes",
        "BOT_DASHBOARD_PORT": "9000", "BOT_DASHBOARD_TOKEN": "t"})
    assert settings.db_path == tmp_path / "x.sqlite3" and settings.hash_ids
    assert settings.database == DatabaseUrl(SQLITE, path=tmp_path / "x.sqlite3")
    assert settings.port == 9000 and settings.token == "t" and settings.is_loopback
    with pytest.raises(DashboardConfigError, match="BOT_DASHBOARD_PORT"):
        DashboardSettings.from_env({"BOT_DASHBOARD_PORT": "http"})
    with pytest.raises(DashboardConfigError, match="both BOT_DASHBOARD_USER"):
        create_app(DashboardSettings(db_path=tmp_path / "x", user="ops"))
    assert not DashboardSettings(host="::").is_loopback and DashboardSettings(host="::1") \
        .is_loopback


def test_the_database_is_the_bots_url_unless_the_dashboard_names_its_own():
    bots = {"BOT_DATABASE_URL": "postgresql://bot:pw@db/bot", "BOT_DB_PATH": "bot.sqlite3"}
    assert DashboardSettings.from_env(bots).database == DatabaseUrl(
        POSTGRESQL, url="postgresql://bot:pw@db/bot")  # the bot prefers the URL too
    assert DashboardSettings.from_env({**bots, "BOT_DASHBOARD_DB_PATH": "copy.sqlite3"}) \
        .database == DatabaseUrl(SQLITE, path=Path("copy.sqlite3"))
    assert DashboardSettings.from_env({**bots, "BOT_DASHBOARD_DATABASE_URL": (
        "postgresql://dashboard@standby/bot")}).database.url == "postgresql://dashboard@standby/bot"
    assert DashboardSettings.from_env({"BOT_DB_PATH": "bot.sqlite3"}).database == DatabaseUrl(
        SQLITE, path=Path("bot.sqlite3"))
    assert DashboardSettings.from_env({}).database.path == DashboardSettings().db_path
    for url, why in (("mysql://ops:pw@db/bot", "scheme 'mysql'"),
                     ("sqlite://", "scheme 'sqlite' naming no file")):
        with pytest.raises(DashboardConfigError, match=why) as raised:
            create_app(DashboardSettings(database_url=url))
        assert "pw" not in str(raised.value) and "BOT_DATABASE_URL" in str(raised.value)


def test_cli_names_the_database_it_cannot_read_without_its_password(tmp_path, monkeypatch,
                                                                    capsys, caplog):
    url = f"postgresql://bot:s3cret@127.0.0.1:{free_port()}/bot"  # nothing listens there
    monkeypatch.setenv("BOT_DATABASE_URL", url)
    for key in ("BOT_DB_PATH", "BOT_DASHBOARD_DB_PATH", "BOT_DASHBOARD_DATABASE_URL"):
        monkeypatch.delenv(key, raising=False)
    with caplog.at_level(logging.ERROR, logger="bot.dashboard.cli"):
        assert bot_main(["dashboard", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot read the database {url.replace('s3cret', '***')} (")
    assert "s3cret" not in err and "s3cret" not in caplog.text
    assert "dashboard_not_started reason=database" in caplog.text

    missing = tmp_path / "bot.sqlite3"  # --db beats BOT_DATABASE_URL
    assert bot_main(["dashboard", "--port", "0", "--db", str(missing)]) == 2
    assert f"cannot read the database {missing}" in capsys.readouterr().err
    assert bot_main(["dashboard", "--port", "0", "--db", "mysql://ops:pw@db/bot"]) == 2
    err = capsys.readouterr().err
    assert "got a URL of scheme 'mysql'" in err and "pw" not in err


async def test_stage_timings_keep_settled_decisions_and_read_only_newer_ones(db_target):
    trace = Trace()
    trace.add("search", "5 hits", "", 2.0)
    async with await Database.open(db_target) as db:
        for _ in range(3):
            await db.record_decision("telegram", 7, None, 7, "text", Result(
                Status.ANSWERED, "q", "en", answer="a", trace=trace))
        async with db.backend.transaction() as tx:  # recorded an hour ago: settled
            await tx.execute("UPDATE decisions SET created_at = ?", (
                (datetime.now(UTC) - timedelta(hours=1)).isoformat(timespec="milliseconds"),))
    timings = StageTimings()
    async with await DecisionReader.open(db_target) as reader:
        assert (await timings.all(reader))["search"] == [2.0] * 3
        assert await reader.settled_id(SETTLE_S) == 3
        async with await Database.open(db_target) as db:
            trace.stages[0] = replace(trace.stages[0], elapsed_ms=9.0)
            await db.record_decision("telegram", 7, None, 7, "text", Result(
                Status.ANSWERED, "q", "en", answer="a", trace=trace))
        again = await timings.all(reader)
        assert again["search"] == [2.0, 2.0, 2.0, 9.0] and again["pipeline_total"][-1] == 9.0
        assert again == await reader.stage_timings()


async def test_channel_filter_knows_the_web_page(db_target):
    """The web channel (``bot.web``) records ``channel = 'web'``; ``?channel=web`` lists those
    decisions and nothing else (it was a 400 while ``storage.reader.CHANNELS`` lacked it)."""
    async with await Database.open(db_target) as db:
        for channel, query in (("web", "from the page"), ("telegram", "from telegram")):
            await db.record_decision(channel, 7, None, 7, "text", Result(
                Status.ANSWERED, query, "en", answer="a"))
    async with client(create_app(settings_for(db_target))) as http:
        response = await http.get("/?channel=web")
        assert response.status == 200, await response.text()
        rows = rows_of(await response.text())
        html = await (await http.get(f"/decision/{rows[0]['id']}")).text()
    assert [r["channel"] for r in rows] == ["web"]
    assert "from the page" in html and "from telegram" not in html


async def test_csv_export_defuses_questions_that_look_like_formulas(db_target):
    async with await Database.open(db_target) as db:
        for query in ('=HYPERLINK("http://evil.example","x")', "+1 555", "what is 2-1"):
            await db.record_decision("telegram", 7, None, 7, "text", Result(
                Status.REFUSED_NO_MATCH, query, "en", top_score=0.1, floor=0.25,
                message="top 0.100 < floor 0.250 (en)"))
    async with client(create_app(settings_for(db_target))) as http:
        rows = list(csv.DictReader(io.StringIO(await (await http.get(
            "/export/refused.csv")).text())))
    assert [r["question"] for r in rows] == [
        "what is 2-1", "'+1 555", "'=HYPERLINK(\"http://evil.example\",\"x\")"]


# ------------------------------------------------------------------ both backends alike

N_BENCH = 240  # decisions of scripts/bench_dashboard.py's generator in the comparison
END = datetime(2026, 3, 9, 18, 30, tzinfo=UTC)  # when the compared log ends (UTC)


async def record_same_log(target: Path | str) -> None:
    """The log both backends hold in the comparison: :data:`N_BENCH` decisions of the
    dashboard benchmark's generator over 6 days ending at :data:`END` (four languages,
    Telegram, WhatsApp, console and command line, voice notes, every refusal, speech-to-text
    outages, failed spoken replies), then a hedged answer, a web question, a reply whose
    encoding failed after its text-to-speech did, and inbox messages left pending and sending,
    all stamped :data:`END`."""
    sys.path.insert(0, str(ROOT / "scripts"))
    bench = importlib.import_module("bench_dashboard")
    await bench.fill(target, N_BENCH, 6, seed=43, end=END)
    trace = Trace()
    trace.add("answerability_gate", "hedged", "p 0.420 < threshold 0.700", 4.0)
    async with await Database.open(target) as db:
        await db.record_decision("telegram", 5, 900, 5, "text", Result(
            Status.HEDGED, "How much does an Xbox 360 cost?", "en", answer="About $299.",
            top_score=0.88, floor=0.84, trace=trace, message="hedged: p 0.420 < 0.700",
            reason=Reason(ReasonCode.HEDGED, "hedged", score=0.88, floor=0.84, lang="en",
                          probability=0.42, threshold=0.7)))
        await db.record_decision("web", 11, None, None, "text", Result(
            Status.ANSWERED, "खीरे में कैलोरी", "hi", answer="१६ कैलोरी", top_score=0.91,
            floor=0.85, trace=trace))
        spoken = await db.record_decision("whatsapp", 919800000002, None, 919800000002,
                                          "voice", Result(Status.ANSWERED, "q", "gu",
                                                          answer="a", trace=trace))
        await db.add_stages(spoken, [Stage("text_to_speech", "ok", "gu-IN", 812.5),
                                     Stage("encode_voice", "failed", "ffmpeg exited 1", 3.25)])
        inbox = Inbox(db)
        for channel, key in (("whatsapp", "wamid.left"), ("telegram", "5/901/0"),
                             ("web", "web/1")):
            await inbox.claim(channel, key, 5, "{}")
        await inbox.mark_sending("telegram", "5/901/0")
        async with db.backend.transaction() as tx:
            await tx.execute("UPDATE decisions SET created_at = ? WHERE id > ?",
                             (END.isoformat(timespec="milliseconds"), N_BENCH))


def english_sorted_database(cluster, name: str) -> str:
    """A new database in ``cluster`` whose text sorts as American English does (ICU ``en-US``:
    ``a`` before ``B``, ``-`` and ``_`` ignored at first), as on a server installed with an
    English locale, unlike the test cluster's C locale, which sorts as SQLite and Python do;
    returns its URL."""
    import psycopg

    with psycopg.connect(cluster.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0 LOCALE_PROVIDER icu '
                     "ICU_LOCALE 'en-US' LOCALE 'C'")
    url = cluster.database_url(name)
    assert query_rows(url, "SELECT 'a' < 'B', 'refused-x' < 'refused_a'") == [(True, False)]
    return url


async def test_every_page_and_metrics_are_the_same_on_sqlite_and_postgresql(tmp_path,
                                                                            pg_cluster):
    targets = (tmp_path / "bot.sqlite3", english_sorted_database(pg_cluster, "dashboard_same"))
    for target in targets:
        await record_same_log(target)
    assert query_rows(targets[0], "SELECT id, created_at, trace FROM decisions ORDER BY id") \
        == query_rows(targets[1], "SELECT id, created_at, trace FROM decisions ORDER BY id")
    [(stt_outage,)] = query_rows(targets[0], "SELECT MAX(id) FROM decisions WHERE status = "
                                             "'error' AND source = 'voice'")
    paths = ["/", "/?per=1000", "/?per=7&page=3", "/?status=refused-no-match&lang=hi",
             "/?channel=whatsapp&source=voice", "/?channel=cli", "/?status=hedged",
             "/?from=2026-03-05&to=2026-03-07", "/?channel=web&lang=hi",
             *(f"/decision/{i}" for i in (1, stt_outage, N_BENCH + 1, N_BENCH + 3)),
             "/refusals?days=366", "/refusals?days=2", "/scores", "/latency",
             "/export/refused.csv", "/metrics"]
    pages: list[dict[str, str]] = []
    for target in targets:
        async with client(create_app(settings_for(target))) as http:
            bodies = {}
            for path in paths:
                response = await http.get(path)
                assert response.status == 200, (target, path, await response.text())
                bodies[path] = await response.text()
            pages.append(bodies)
    on_sqlite, on_postgresql = pages
    for path in paths:
        assert on_postgresql[path] == on_sqlite[path], path

    # what was compared is the whole log, not two empty pages
    families = {f.name: f for f in text_string_to_metric_families(on_sqlite["/metrics"])}
    n_questions = sum(s.value for s in families["voice_rag_questions"].samples
                      if s.name == "voice_rag_questions_total")
    assert n_questions == N_BENCH + 3
    errors = {(s.labels["service"], s.labels["stage"]) for s in families[
        "voice_rag_speech_errors"].samples if s.name == "voice_rag_speech_errors_total"}
    assert errors == {("stt", "speech_to_text"), ("tts", "text_to_speech"),
                      ("tts", "encode_voice")}
    backlog = {(s.labels["channel"], s.labels["status"]): s.value
               for s in families["voice_rag_inbox_backlog"].samples if s.value}
    assert backlog == {("whatsapp", "pending"): 1, ("telegram", "sending"): 1,
                       ("web", "pending"): 1}
    assert len(rows_of(on_sqlite["/?per=1000"])) == N_BENCH + 3
    assert len(re.findall(r"<b>2026-03-\d\d</b>", on_sqlite["/refusals?days=366"])) == 7
    assert on_sqlite["/export/refused.csv"].count("\n") > 20


async def test_a_role_that_may_only_select_reads_every_page(pg_url):
    """The role docs/operations.md suggests for the dashboard: it may log in and SELECT, no
    more; every page reads as the bot's own role's does."""
    import psycopg

    await record_same_log(pg_url)
    database = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for sql in ("CREATE ROLE dashboard_reader LOGIN",
                    f'GRANT CONNECT ON DATABASE "{database}" TO dashboard_reader',
                    "GRANT USAGE ON SCHEMA public TO dashboard_reader",
                    "GRANT SELECT ON ALL TABLES IN SCHEMA public TO dashboard_reader"):
            conn.execute(sql)
    reader_url = pg_url.replace("//postgres@", "//dashboard_reader@")
    paths = ("/", "/refusals", "/latency", "/export/refused.csv", "/metrics")
    pages = []
    for url in (pg_url, reader_url):
        async with client(create_app(settings_for(url))) as http:
            pages.append([await (await http.get(path)).text() for path in paths])
    assert pages[1] == pages[0] and "voice_rag_inbox_backlog{" in pages[1][-1]
