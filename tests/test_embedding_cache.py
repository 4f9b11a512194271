"""The pipeline embeds a text once: the same question (or selected answer) again gets the vector
kept from the first time, unchanged, also when copies arrive at once (issue 24's burst)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from rag.embedding_cache import EmbeddingCache
from rag.index import PassageIndex
from rag.pipeline import Pipeline
from tests.fakes import HashingEncoder


class CountingEncoder(HashingEncoder):
    """The fake encoder, counting the texts it was asked to embed (and slow enough that
    concurrent callers overlap)."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []
        self.passages: list[str] = []
        self._lock = threading.Lock()

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            self.queries += texts
        threading.Event().wait(0.01)
        return super().encode_queries(texts)

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        with self._lock:
            self.passages += texts
        return super().encode_passages(texts, batch_size)


@pytest.fixture
def counting_pipeline(fake_settings, fake_encoder, fake_index_dir):
    encoder = CountingEncoder()
    index = PassageIndex.load(fake_index_dir, encoder_name=fake_encoder.name)
    return Pipeline(fake_settings, encoder, index, gate=None), encoder


def test_the_same_question_again_is_answered_alike_without_embedding_it_again(counting_pipeline):
    pipeline, encoder = counting_pipeline
    first = pipeline.ask("How much does an Xbox 360 cost?")
    second = pipeline.ask("How much does an Xbox 360 cost?")
    assert encoder.queries == ["How much does an Xbox 360 cost"]  # read without its "?"
    assert (second.status, second.answer, second.citations) == (
        first.status, first.answer, first.citations)
    assert second.top_score == first.top_score


def test_copies_asked_at_once_embed_the_question_once(counting_pipeline):
    pipeline, encoder = counting_pipeline
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(pipeline.ask, ["calories in a small cucumber"] * 8))
    assert encoder.queries == ["calories in a small cucumber"]
    assert len({r.answer for r in results}) == 1


def test_an_answer_text_is_embedded_once_and_its_vector_is_unchanged(counting_pipeline):
    pipeline, encoder = counting_pipeline
    direct = HashingEncoder().encode_passages(["Xbox 360 costs $299."])
    first = pipeline.encode_passages(["Xbox 360 costs $299."])
    again = pipeline.encode_passages(["Xbox 360 costs $299."])
    assert encoder.passages == ["Xbox 360 costs $299."]
    assert first.shape == (1, 384) and np.array_equal(first, direct)
    assert np.array_equal(again, direct)
    with pytest.raises(ValueError):  # read-only: a caller cannot change what others get
        again[0, 0] = 1.0
    # several texts at once are embedded as asked, not from the cache
    pipeline.encode_passages(["Xbox 360 costs $299.", "another"])
    assert encoder.passages[1:] == ["Xbox 360 costs $299.", "another"]


def test_cache_drops_the_least_recently_used_vector_beyond_its_size():
    cache = EmbeddingCache(max_entries=2)
    for name in ("a", "b"):
        cache.put(("query", name), np.ones(3))
    assert cache.get(("query", "a")) is not None  # "a" used: "b" is now the oldest
    cache.put(("query", "c"), np.ones(3))
    assert cache.get(("query", "b")) is None
    assert cache.get(("query", "a")) is not None and len(cache) == 2
    keeps_none = EmbeddingCache(max_entries=0)
    keeps_none.put(("query", "a"), np.ones(3))
    assert keeps_none.get(("query", "a")) is None and len(keeps_none) == 0
