"""The web page over real HTTP (``bot.web.app.serving``, httpx as the browser) answered by the
fake pipeline (``tests.fakes``): fast. What a person sees: the page in the reply's language,
sources they can read, "Why?" in plain words first, a cut question said to be cut, the
conversation kept in the database across a restart, the fonts and favicon served, and the
start-up checks of ``python -m bot --web``. (tests/test_web.py runs the production pipeline,
tests/test_web_browser.py a real browser.)"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from bot.chat.messages import t
from bot.chat.ratelimit import RateLimiter
from bot.chat.services import Services
from bot.cli import main as bot_main
from bot.web.app import CHANNEL, chat_id_of, serving
from bot.web.assets import WEB_FONTS
from bot.web.settings import MIN_TOKEN_CHARS, WebSettings
from bot.web.views import OPENING_CHARS
from storage.web_exchanges import WebExchanges
from tests.conftest import needs_tools
from tests.fakes import chat_settings

XBOX = "How much does an Xbox 360 cost?"
CUCUMBER_HI = "छोटे खीरे में कैलोरी की मात्रा"
NOTO = Path("/usr/share/fonts/truetype/noto")


@pytest.fixture
def bot_settings(tmp_path, fake_settings, sarvam):
    return chat_settings(fake_settings, tmp_path / "bot.sqlite3", sarvam)


@pytest.fixture
def fonts_dir(tmp_path) -> Path:
    """Two of the six font files (fake bytes): the page serves what is there, no more."""
    folder = tmp_path / "fonts"
    folder.mkdir()
    for font in WEB_FONTS[:2]:
        (folder / font.file).write_bytes(b"\0\1\0\0" + font.file.encode())
    return folder


@pytest.fixture
async def services(bot_settings, fake_pipeline) -> AsyncIterator[Services]:
    opened = await Services.open(bot_settings, fake_pipeline)
    yield opened
    await opened.close()


@pytest.fixture
async def front(services, fonts_dir) -> AsyncIterator:
    async with serving(services, WebSettings(port=0, fonts_dir=fonts_dir)) as (front_end, url):
        front_end.url = url
        yield front_end


@pytest.fixture
async def browser(front) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=front.url, timeout=60) as client:
        yield client


def form_msg(page: str) -> str:
    return re.search(r'name="msg" id="msg" value="([0-9a-f]{32})"', page).group(1)


async def ask(client: httpx.AsyncClient, question: str, **headers) -> str:
    page = (await client.get("/", headers=headers)).text
    sent = await client.post("/ask", data={"question": question, "msg": form_msg(page)},
                             headers=headers)
    assert sent.status_code == 303, sent.text
    return (await client.get("/", headers=headers)).text


def articles(page: str) -> list[str]:
    return re.findall(r"<article .*?</article>", page, flags=re.S)


def text_of(fragment: str) -> str:
    """The words of an HTML fragment, tags dropped, entities left as they are."""
    return " ".join(re.sub(r"<[^>]+>", " ", fragment).split())


async def test_a_hindi_reply_labels_its_exchange_and_the_page_in_hindi(browser):
    page = await ask(browser, CUCUMBER_HI)
    [article] = articles(page)
    assert '<html lang="hi">' in page and 'lang="hi" data-kind=' in article
    kind = re.search(r'data-kind="(\w+)"', article).group(1)
    assert kind in ("confident", "hedged")
    assert f'<span class="badge kind-{kind}">{t("web_kind_" + kind, "hi")}</span>' in article
    for key in ("web_you_asked", "sources", "web_why", "web_why_more"):
        assert t(key, "hi") in article, key
    # the page's own words follow the newest reply: the form, the button, the tagline
    for key in ("web_question_label", "web_ask", "web_tagline"):
        assert t(key, "hi") in page, key
    assert "Your question" not in page and ">Sources<" not in page
    # an English question after it: its own card and the page turn English, the first stays
    page = await ask(browser, XBOX)
    first, second = articles(page)
    assert t("web_you_asked", "hi") in first and ">You asked<" in second
    assert '<html lang="en">' in page and '<label for="question">Your question</label>' in page


async def test_the_browsers_language_labels_a_new_page_and_lang_fixes_it(browser):
    page = (await browser.get("/", headers={"Accept-Language": "gu-IN,gu;q=0.9"})).text
    assert '<html lang="gu">' in page and t("web_question_label", "gu") in page
    page = await ask(browser, "/lang te", **{"Accept-Language": "en-US"})
    assert '<html lang="te">' in page and t("web_question_label", "te") in page


async def test_sources_show_language_opening_words_and_the_whole_passage(browser, front):
    [article] = articles(await ask(browser, XBOX))
    reply = re.search(r'<div class="reply">(.*?)</div>', article, re.S).group(1)
    assert re.search(r"\[1\]$", text_of(reply)), reply  # the answer's mark
    assert "Sources" not in reply  # listed below instead, readable
    items = re.findall(r'<li id="src-[0-9a-f]{32}-(\d)".*?</li>', article, re.S)
    assert items and items[0] == "1"
    first = re.search(r'<li id="src-[0-9a-f]{32}-1".*?</li>', article, re.S).group(0)
    passage_id = re.search(r"<code>(\w\w-\d+-\d+)</code>", first).group(1)
    index = front.services.pipeline.index
    whole = index.passages[index.label_of(passage_id)].text
    assert "Passage in English" in first and re.search(r"match 0\.\d{3}", first)
    opening = re.search(r'<span class="opening" lang="en">(.*?)</span>', first, re.S).group(1)
    assert len(opening) <= OPENING_CHARS + 1 and whole.startswith(opening.rstrip("…")[:40])
    if len(whole) > OPENING_CHARS:  # the control that shows the whole passage
        assert "<summary>Show the whole passage</summary>" in first
        shown = re.search(r'<details><summary>.*?</summary><p lang="en">(.*?)</p>', first,
                          re.S).group(1)
        assert shown.replace("&#39;", "'").replace("&quot;", '"').replace("&amp;", "&") == whole


async def test_why_says_the_decision_in_plain_words_before_the_stage_table(browser):
    [article] = articles(await ask(browser, XBOX))
    why = re.search(r'<details class="why">(.*?)</details>', article, re.S).group(1)
    summary = re.search(r'<p class="why-summary">(.*?)</p>', why, re.S).group(1)
    assert summary.startswith("Answered: the closest passage matched your question with a "
                              "score of 0.")
    assert re.search(r"It took \d+\.\d\d s in \d+ step\(s\):$", summary), summary
    assert why.index("why-summary") < why.index("<table")
    assert "<th>Step</th><th>Outcome</th><th>Detail</th><th>ms</th>" in why
    for stage in ("input_guard", "search", "relevance_guard", "grounding_guard"):
        assert f"<td><code>{stage}</code></td>" in why, stage
    # a refusal says why not, with its numbers, in plain words
    refused = articles(await ask(browser, "Who is the Prime Minister of India?"))[-1]
    assert 'data-kind="refused"' in refused
    assert re.search(r'<p class="why-summary">Not answered: I could not find this in my '
                     r"sources: best match 0\.\d{3} is below the floor 0\.250\.", refused)


async def test_a_5000_character_question_is_answered_from_its_start_and_says_it_was_cut(
        browser, services):
    question = XBOX + " " + "Please tell me the price of the console in dollars. " * 100
    question = question[:4999] + "?"  # 5,000 characters, none of them folded by cleaning
    [article] = articles(await ask(browser, question))
    note = t("question_cut", "en", n_chars="5,000", n_kept=r"\d{3}", max_chars="1,000")
    assert re.search(note.replace(".", r"\."), text_of(article)), text_of(article)[:400]
    stored = await services.db.last_decision(CHANNEL, chat_id_of(browser.cookies[
        "voice_rag_web"]))
    assert stored.result.cut.n_chars == 5000 and len(stored.result.query) <= 1000
    # the box warns before sending: the limit and the words are on the form
    page = (await browser.get("/")).text
    assert 'data-max="1000"' in page and "only the first {max_chars} will be read" in page
    assert "maxlength" not in page  # the browser no longer cuts a paste silently


async def test_an_empty_question_gets_its_notice_beside_the_form(browser):
    page = (await browser.get("/")).text
    sent = await browser.post("/ask", data={"question": "   ", "msg": form_msg(page)})
    assert sent.headers["Location"] == "/?notice=empty"
    page = (await browser.get("/?notice=empty")).text
    form = re.search(r'<form class="ask".*?</form>', page, re.S).group(0)
    assert '<p class="notice" id="notice" role="alert">Type a question first.</p>' in form
    assert (await browser.get("/?notice=<script>")).text.count("<script>") == 1  # the page's


async def test_the_conversation_is_kept_in_the_database_across_a_restart(services, fonts_dir,
                                                                          browser, front):
    await ask(browser, XBOX)
    await ask(browser, "/help")
    before = articles((await browser.get("/")).text)
    chat_id = chat_id_of(browser.cookies["voice_rag_web"])
    assert [e.question for e in await WebExchanges(services.db).of_chat(chat_id)] == [
        XBOX, "/help"]
    async with serving(services, WebSettings(port=0, fonts_dir=fonts_dir)) as (_again, url):
        after = articles((await browser.get(url + "/")).text)  # same cookie, a new process
    assert after == before and len(after) == 2


async def test_fonts_present_are_served_and_named_in_the_css_and_the_favicon_is_there(
        browser, fonts_dir):
    page = (await browser.get("/")).text
    served, missing = WEB_FONTS[0], WEB_FONTS[2]
    assert f'url("/fonts/{served.file}")' in page and f'"{served.family}"' in page
    assert missing.file not in page  # absent: left out, the system's fonts stand in
    font = await browser.get(f"/fonts/{served.file}")
    assert font.status_code == 200 and font.content == (fonts_dir / served.file).read_bytes()
    assert font.headers["Content-Type"] == "font/ttf"
    for name in (missing.file, "../bot.sqlite3", "x.ttf"):
        assert (await browser.get(f"/fonts/{name}")).status_code == 404
    icon = await browser.get("/favicon.ico")
    assert icon.status_code == 200 and icon.content[:4] == b"\0\0\1\0"  # an ICO
    svg = await browser.get("/favicon.svg")
    assert svg.status_code == 200 and svg.content.startswith(b"<svg")


@needs_tools("fonts-noto-core")
async def test_the_installed_noto_fonts_are_all_served(services):
    async with serving(services, WebSettings(port=0)) as (front, url):
        assert front.fonts == WEB_FONTS
        async with httpx.AsyncClient(base_url=url) as client:
            for font in WEB_FONTS:
                served = await client.get(f"/fonts/{font.file}")
                assert served.content == (NOTO / font.file).read_bytes()


async def test_with_a_token_fonts_and_favicon_need_none_and_the_page_does(services, fonts_dir):
    token = "k" * MIN_TOKEN_CHARS
    settings = WebSettings(port=0, token=token, fonts_dir=fonts_dir)
    async with serving(services, settings) as (_front, url):
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/")).status_code == 401
            assert (await client.get("/favicon.ico")).status_code == 200
            assert (await client.get(f"/fonts/{WEB_FONTS[0].file}")).status_code == 200
            assert (await client.get("/audio/" + "a" * 32)).status_code == 401


def test_a_short_token_and_an_exposed_host_are_refused_at_start_with_the_fix(capsys):
    assert WebSettings(token="abc").start_problem() == (
        "BOT_WEB_TOKEN is 3 characters: use at least 16 (e.g. $(openssl rand -hex 16)), so "
        "that it cannot be guessed")
    assert WebSettings(host="0.0.0.0", token="k" * 16).start_problem() is None
    assert "no token" in WebSettings(host="0.0.0.0").start_problem()
    assert WebSettings(host="::1").start_problem() is None
    # the options win over the variables, and the checks see them
    settings = WebSettings.from_env({"BOT_WEB_HOST": "127.0.0.1", "BOT_WEB_PORT": "9000"},
                                    host="0.0.0.0", port=0)
    assert (settings.host, settings.port) == ("0.0.0.0", 0)
    assert bot_main(["--web", "--host", "0.0.0.0"]) == 2
    assert "reachable beyond this machine (host 0.0.0.0) with no token" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bot_main(["--web", "--port", "99999"])
    assert "must be a port number 0-65535, got '99999'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bot_main(["--host", "0.0.0.0"])
    assert "go with --web" in capsys.readouterr().err


async def test_a_view_written_by_another_process_is_shown_as_it_was_stored(services, browser,
                                                                          front):
    """Replicas: the page is what the database holds, whoever answered."""
    await browser.get("/")
    chat_id = chat_id_of(browser.cookies["voice_rag_web"])
    store = WebExchanges(services.db)
    await store.add(chat_id, f"{chat_id}:{'e' * 32}", "<b>asked elsewhere</b>")
    view = {"v": 1, "kind": "refused", "lang": "te", "decision_id": 5, "heard": None,
            "replies": [[["<i>answered elsewhere</i>", "plain"]]], "sources": [], "why": None}
    await store.set_view(f"{chat_id}:{'e' * 32}", json.dumps(view), is_done=True)
    [article] = articles((await browser.get("/")).text)
    assert "&lt;b&gt;asked elsewhere&lt;/b&gt;" in article
    assert "&lt;i&gt;answered elsewhere&lt;/i&gt;" in article
    assert f'<span class="badge kind-refused">{t("web_kind_refused", "te")}</span>' in article


def test_settings_default_to_a_month_and_thirty_exchanges_and_refuse_bad_values():
    settings = WebSettings.from_env({})
    assert (settings.keep_days, settings.history, settings.trust_proxy) == (30.0, 30, False)
    with pytest.raises(ValueError, match="BOT_WEB_KEEP_DAYS"):
        WebSettings.from_env({"BOT_WEB_KEEP_DAYS": "0"})
    with pytest.raises(ValueError, match="BOT_WEB_TRUST_PROXY"):
        WebSettings.from_env({"BOT_WEB_TRUST_PROXY": "maybe"})


async def test_behind_a_trusted_proxy_new_sessions_are_counted_per_forwarded_address(
        services, fonts_dir):
    async with serving(services, WebSettings(port=0, fonts_dir=fonts_dir,
                                             trust_proxy=True)) as (front, url):
        front.new_sessions = RateLimiter(1, 3600.0)
        codes = []
        for address in ("10.0.0.1", "10.0.0.2", "10.0.0.1"):
            async with httpx.AsyncClient(base_url=url) as fresh:  # a new session each time
                sent = await fresh.post("/ask", data={"question": "/help"}, headers={
                    "X-Forwarded-For": f"203.0.113.9, {address}"})  # a client's claim first
                codes.append(sent.status_code)
    assert codes == [303, 303, 429]
