"""The operator's dashboard over a decision log filled by real bot runs (tests/dashboard_runs.py:
Telegram, console and WhatsApp against their stand-ins, answering from the fake pipeline), over
HTTP on 127.0.0.1: /metrics parsed with prometheus_client's parser, filters, 400s, access
control, hashed ids, the CSV export, the read-only reader, mounting as a sub-app. The browser
tests are in tests/test_dashboard_browser.py (slow)."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
import sqlite3
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
from rag.types import Result, Status, Trace
from storage.db import Database
from storage.errors import DatabaseOpenError
from storage.reader import DecisionFilter, DecisionReader
from tests.conftest import needs_tools
from tests.dashboard_runs import PM, SCRIPT, WA_ID, XBOX, fill_by_bot_runs

pytestmark = needs_tools("espeak-ng", "ffmpeg")

TOKEN = "dashboard-test-token"


@pytest.fixture(scope="module")
def bot_db(tmp_path_factory, fake_settings, fake_pipeline) -> Path:
    """The decision log of :data:`tests.dashboard_runs.SCRIPT`, recorded by the real bots."""
    db_path = tmp_path_factory.mktemp("dashboard") / "bot.sqlite3"
    asyncio.run(fill_by_bot_runs(fake_settings, fake_pipeline, db_path))
    return db_path


@asynccontextmanager
async def client(app: web.Application) -> AsyncIterator[TestClient]:
    async with TestClient(TestServer(app, host="127.0.0.1")) as http:
        yield http


def settings_for(db_path: Path, **changes) -> DashboardSettings:
    return replace(DashboardSettings(db_path=db_path, index_dir=db_path.parent / "none"),
                   **changes)


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
    with sqlite3.connect(bot_db) as conn:  # and the log itself says the same
        by_status = Counter(dict(conn.execute(
            "SELECT status, COUNT(*) FROM decisions GROUP BY status").fetchall()))
        traces = [json.loads(t) for (t,) in conn.execute("SELECT trace FROM decisions")]
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
    with sqlite3.connect(bot_db) as conn:
        [(decision_id,)] = conn.execute(
            "SELECT id FROM decisions WHERE source = 'voice' AND status = 'answered'").fetchall()
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


def test_exposure_without_a_token_or_a_missing_database_does_not_start(bot_db, capsys):
    for host in ("0.0.0.0", "192.168.1.5", "dashboard.example.org"):
        with pytest.raises(DashboardConfigError, match="set BOT_DASHBOARD_TOKEN"):
            create_app(settings_for(bot_db, host=host))
    with pytest.raises(DashboardConfigError, match="set BOT_DASHBOARD_TOKEN"):
        create_app(settings_for(bot_db), is_exposed=True)  # mounted in the webhook server
    assert bot_main(["dashboard", "--host", "0.0.0.0", "--db", str(bot_db)]) == 2
    assert "error: the dashboard would be reachable beyond this machine (host 0.0.0.0): set " \
           "BOT_DASHBOARD_TOKEN" in capsys.readouterr().err
    missing = bot_db.parent / "missing.sqlite3"
    assert bot_main(["dashboard", "--port", "0", "--db", str(missing)]) == 2
    assert "cannot read the database" in capsys.readouterr().err and not missing.exists()


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


async def test_reader_is_read_only_and_never_blocks_the_bot(tmp_path, bot_db):
    missing = tmp_path / "none.sqlite3"
    with pytest.raises(DatabaseOpenError, match="no such file"):
        await DecisionReader.open(missing)
    assert not missing.exists()
    not_db = tmp_path / "notes.sqlite3"
    not_db.write_text("not a database")
    with pytest.raises(DatabaseOpenError):
        await DecisionReader.open(not_db)

    db_path = tmp_path / "live.sqlite3"
    async with await Database.open(db_path) as db:
        await db.record_decision("telegram", 7, 1, 7, "text",
                                 Result(Status.ANSWERED, "q", "en", answer="a"))
        async with await DecisionReader.open(db_path) as reader:
            with pytest.raises(sqlite3.OperationalError, match="readonly|read-only"):
                await reader._conn.execute("DELETE FROM decisions")
            # a read in progress (an open cursor mid-scan) does not stop the bot's commit
            async with reader._conn.execute("SELECT id FROM decisions") as cursor:
                await cursor.fetchone()
                await asyncio.wait_for(db.record_decision(
                    "telegram", 7, 2, 7, "text",
                    Result(Status.ERROR, "q2", "en", message="boom")), 2)
            page = await reader.decisions(DecisionFilter())
    assert [r.query for r in page.rows] == ["q2", "q"]
    assert [r.channel for r in page.rows] == ["telegram", "telegram"]


async def test_settings_from_environment(tmp_path):
    settings = DashboardSettings.from_env({
        "BOT_DB_PATH": str(tmp_path / "x.sqlite3"), "BOT_DASHBOARD_HASH_IDS": "yes",
        "BOT_DASHBOARD_PORT": "9000", "BOT_DASHBOARD_TOKEN": "t"})
    assert settings.db_path == tmp_path / "x.sqlite3" and settings.hash_ids
    assert settings.port == 9000 and settings.token == "t" and settings.is_loopback
    with pytest.raises(DashboardConfigError, match="BOT_DASHBOARD_PORT"):
        DashboardSettings.from_env({"BOT_DASHBOARD_PORT": "http"})
    with pytest.raises(DashboardConfigError, match="both BOT_DASHBOARD_USER"):
        create_app(DashboardSettings(db_path=tmp_path / "x", user="ops"))
    assert not DashboardSettings(host="::").is_loopback and DashboardSettings(host="::1") \
        .is_loopback


async def test_stage_timings_keep_settled_decisions_and_read_only_newer_ones(tmp_path):
    db_path = tmp_path / "timings.sqlite3"
    trace = Trace()
    trace.add("search", "5 hits", "", 2.0)
    async with await Database.open(db_path) as db:
        for _ in range(3):
            await db.record_decision("telegram", 7, None, 7, "text", Result(
                Status.ANSWERED, "q", "en", answer="a", trace=trace))
    with sqlite3.connect(db_path) as conn:  # recorded an hour ago: settled
        conn.execute("UPDATE decisions SET created_at = ?", (
            (datetime.now(UTC) - timedelta(hours=1)).isoformat(timespec="milliseconds"),))
    timings = StageTimings()
    async with await DecisionReader.open(db_path) as reader:
        assert (await timings.all(reader))["search"] == [2.0] * 3
        assert await reader.settled_id(SETTLE_S) == 3
        async with await Database.open(db_path) as db:
            trace.stages[0] = replace(trace.stages[0], elapsed_ms=9.0)
            await db.record_decision("telegram", 7, None, 7, "text", Result(
                Status.ANSWERED, "q", "en", answer="a", trace=trace))
        again = await timings.all(reader)
        assert again["search"] == [2.0, 2.0, 2.0, 9.0] and again["pipeline_total"][-1] == 9.0
        assert again == await reader.stage_timings()


async def test_channel_filter_knows_the_web_page(tmp_path):
    """The web channel (``bot.web``) records ``channel = 'web'``; ``?channel=web`` lists those
    decisions and nothing else (it was a 400 while ``storage.reader.CHANNELS`` lacked it)."""
    db_path = tmp_path / "web.sqlite3"
    async with await Database.open(db_path) as db:
        for channel, query in (("web", "from the page"), ("telegram", "from telegram")):
            await db.record_decision(channel, 7, None, 7, "text", Result(
                Status.ANSWERED, query, "en", answer="a"))
    async with client(create_app(settings_for(db_path))) as http:
        response = await http.get("/?channel=web")
        assert response.status == 200, await response.text()
        rows = rows_of(await response.text())
        html = await (await http.get(f"/decision/{rows[0]['id']}")).text()
    assert [r["channel"] for r in rows] == ["web"]
    assert "from the page" in html and "from telegram" not in html


async def test_csv_export_defuses_questions_that_look_like_formulas(tmp_path):
    db_path = tmp_path / "formula.sqlite3"
    async with await Database.open(db_path) as db:
        for query in ('=HYPERLINK("http://evil.example","x")', "+1 555", "what is 2-1"):
            await db.record_decision("telegram", 7, None, 7, "text", Result(
                Status.REFUSED_NO_MATCH, query, "en", top_score=0.1, floor=0.25,
                message="top 0.100 < floor 0.250 (en)"))
    async with client(create_app(settings_for(db_path))) as http:
        rows = list(csv.DictReader(io.StringIO(await (await http.get(
            "/export/refused.csv")).text())))
    assert [r["question"] for r in rows] == [
        "what is 2-1", "'+1 555", "'=HYPERLINK(\"http://evil.example\",\"x\")"]
