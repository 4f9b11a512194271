"""Hybrid retrieval (issue 21): BM25 terms, the sparse index beside the graphs and its checks at
load, fusion with the dense ranking, and what /why shows. Fast: the fake 200-passage index."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from rag.errors import IndexCorruptError, IndexNotFoundError, ModelFileError
from rag.index import PassageIndex
from rag.pipeline import Pipeline
from rag.retrieval import Fusion, fuse, load_fusion, retrieve
from rag.settings import RagSettings
from rag.sparse import SPARSE_DIR, passage_terms
from rag.types import Trace


def test_terms_keep_indic_words_whole_and_fold_digits_and_joiners():
    assert passage_terms("किताब की क़ीमत ५०० रुपये है।", "hi") == ["किताब", "क़ीमत", "500", "रुपये"]
    assert passage_terms("પુસ્‍તક", "gu") == ["પુસ્તક"]  # ZWJ inside the word is dropped
    assert passage_terms("How much does an Xbox cost?", "en") == ["xbox", "cost"]
    # a query's language is a guess: every language's stopwords go
    assert passage_terms("umm so what is the xbox की कीमत", None) == ["xbox", "कीमत"]


@pytest.fixture
def index_copy(fake_index_dir, tmp_path):
    copy = tmp_path / "index"
    shutil.copytree(fake_index_dir, copy)
    return copy


def test_the_build_writes_bm25_beside_the_graphs_and_records_it(fake_index_dir):
    meta = json.loads((fake_index_dir / "meta.json").read_text())
    assert meta["sparse"]["version"] == 1 and meta["sparse"]["n_passages"] == 200
    assert meta["sparse"]["library"].startswith("bm25s ")
    assert (fake_index_dir / SPARSE_DIR).is_dir()


@pytest.mark.parametrize(("damage", "says"), [
    (lambda d: (d / SPARSE_DIR / "data.csc.index.npy").write_bytes(b"\x93NUMPY"), "damaged"),
    (lambda d: shutil.rmtree(d / SPARSE_DIR), "damaged"),
    (lambda d: (d / SPARSE_DIR / "params.index.json").write_text("{"), "damaged"),
], ids=["truncated-matrix", "missing-folder", "broken-params"])
def test_a_damaged_bm25_index_stops_loading_with_one_line_and_the_fix(index_copy, damage, says):
    damage(index_copy)
    with pytest.raises(IndexCorruptError) as caught:
        PassageIndex.load(index_copy)
    message = str(caught.value)
    assert says in message and "python -m ragtools build-index" in message
    assert str(index_copy / SPARSE_DIR) in message and "\n" not in message


def test_a_bm25_index_of_another_size_or_format_is_refused(index_copy):
    meta = json.loads((index_copy / "meta.json").read_text())
    (index_copy / "meta.json").write_text(json.dumps({**meta, "sparse": {**meta["sparse"],
                                                                         "n_passages": 199}}))
    with pytest.raises(IndexCorruptError,
                       match=r"holds 200 passages \(meta.json says 199\), the dense index 200"):
        PassageIndex.load(index_copy)
    (index_copy / "meta.json").write_text(json.dumps({**meta, "sparse": {**meta["sparse"],
                                                                         "version": 99}}))
    with pytest.raises(IndexCorruptError, match="BM25 format 99"):
        PassageIndex.load(index_copy)


def test_hybrid_needs_the_bm25_index_and_says_how_to_get_it(index_copy, fake_encoder):
    meta = json.loads((index_copy / "meta.json").read_text())
    (index_copy / "meta.json").write_text(json.dumps({**meta, "sparse": None}))
    index = PassageIndex.load(index_copy)  # an index from before hybrid retrieval still loads
    assert index.sparse is None
    with pytest.raises(IndexNotFoundError, match="VOICE_RAG_RETRIEVAL=dense"):
        Pipeline(RagSettings(index_dir=index_copy), fake_encoder, index, gate=None,
                 fusion={"en": Fusion("weighted", 0.8)})


def test_fusion_reorders_the_dense_pool_and_keeps_true_cosines(fake_pipeline):
    index, query = fake_pipeline.index, "How much does an Xbox 360 cost?"
    vector = fake_pipeline.encode_query(query)
    pool = retrieve(index, vector, "en", 15, is_explicit=False, pool_factor=1)
    sparse = index.sparse_scores(passage_terms(query, None), "en")
    assert sparse.shape == (len(index),) and (sparse[[p.lang != "en" for p in index.passages]]
                                              == 0).all()
    for fusion in (Fusion("rrf", 0.5), Fusion("weighted", 0.5)):
        hits = fuse(index, vector, pool, sparse, "en", 5, fusion)
        assert len(hits) == 5 and [h.rank_score for h in hits] == sorted(
            (h.rank_score for h in hits), reverse=True)
        stored = index.vectors([index.label_of(h.passage.id) for h in hits]) @ vector
        np.testing.assert_allclose([h.score for h in hits], stored, atol=1e-5)
        assert all(h.dense_rank or h.sparse_rank for h in hits)
    only_dense = fuse(index, vector, pool, sparse, "en", 5, Fusion("rrf", 1.0))
    assert [h.passage.id for h in only_dense] == [h.passage.id for h in pool[:5]]
    best_bm25 = int(np.argmax(sparse))
    only_sparse = fuse(index, vector, pool, sparse, "en", 5, Fusion("weighted", 0.0))
    assert only_sparse[0].passage.id == index.passages[best_bm25].id
    assert only_sparse[0].sparse_rank == 1


def test_why_shows_dense_and_bm25_ranks_and_the_floor_keeps_the_dense_top(fake_pipeline):
    hybrid = Pipeline(fake_pipeline.settings, fake_pipeline.encoder, fake_pipeline.index,
                      gate=None, fusion={"en": Fusion("weighted", 0.0)})
    query = "How much does an Xbox 360 cost?"
    prepared = hybrid.prepare(query, None, None, Trace())
    search = prepared.trace.get("search")
    assert search.decision == "5 hits, hybrid weighted"
    assert search.detail.count("(dense ") == 5 and "bm25 1)" in search.detail
    dense_top, _ = fake_pipeline.search(query, fake_pipeline.encode_query(query), "en", False)
    assert prepared.relevance.top_score == pytest.approx(dense_top[0].score)


def test_a_malformed_fusion_file_and_an_unknown_retrieval_setting_are_refused(tmp_path):
    bad = tmp_path / "fusion.json"
    bad.write_text(json.dumps({"languages": {"en": {"method": "max", "dense_weight": 0.5}}}))
    with pytest.raises(ModelFileError, match="VOICE_RAG_RETRIEVAL=dense"):
        load_fusion(bad)
    bad.write_text(json.dumps({"languages": {"hi": {"method": "rrf", "dense_weight": 2}}}))
    with pytest.raises(ModelFileError):
        load_fusion(bad)
    assert set(load_fusion()) <= {"en", "hi", "gu", "te"}
    with pytest.raises(ValueError, match="VOICE_RAG_RETRIEVAL must be one of dense, hybrid"):
        RagSettings.from_env({"VOICE_RAG_RETRIEVAL": "sparse"})
