import json

import numpy as np
import pytest

from rag.errors import EncoderMismatchError, IndexNotFoundError
from rag.index import PassageIndex, SearchParams, build_index
from rag.retrieval import retrieve

QUERY_IDS = {1102432, 233826, 300122, 1090355}  # present in all four languages


@pytest.fixture(scope="module")
def small(sample_passages, encoder, tmp_path_factory):
    passages = [p for p in sample_passages if p.query_id in QUERY_IDS]
    index_dir = tmp_path_factory.mktemp("small-index")
    meta = build_index(passages, encoder, index_dir, SearchParams(exact=True), show_progress=False)
    return passages, index_dir, meta


def test_index_round_trip_keeps_passages_meta_and_vectors(small, encoder):
    passages, index_dir, meta = small
    index = PassageIndex.load(index_dir, encoder_name=encoder.name)
    assert index.passages == passages
    assert set(meta.n_passages) == {"en", "hi", "gu", "te"} and all(meta.n_passages.values())
    assert json.loads((index_dir / "meta.json").read_text())["encoder"] == encoder.name
    label = index.label_of(passages[3].id)
    stored = index.vectors([label])[0]
    fresh = encoder.encode_passages([passages[3].text])[0]
    assert float(stored @ fresh) > 0.9999


def test_search_matches_brute_force_cosine(small, encoder):
    passages, index_dir, _ = small
    index = PassageIndex.load(index_dir)
    hi = [i for i, p in enumerate(passages) if p.lang == "hi"]
    matrix = encoder.encode_passages([passages[i].text for i in hi])
    q = encoder.encode_queries(["गरुड़ कितनी तेजी से उड़ता है"])[0]
    expected = [hi[i] for i in np.argsort(-(matrix @ q))[:5]]
    got = index.search(q, "hi", 5)
    assert [label for label, _ in got] == expected
    assert got[0][1] == pytest.approx(float(np.max(matrix @ q)), abs=1e-4)


def test_loading_with_another_encoder_is_a_clear_error(small):
    _, index_dir, _ = small
    with pytest.raises(EncoderMismatchError, match="rebuild"):
        PassageIndex.load(index_dir, encoder_name="sentence-transformers:some-other-model")


def test_missing_index_names_the_build_command(tmp_path):
    with pytest.raises(IndexNotFoundError, match=r"python -m rag --index \S+ build-index"):
        PassageIndex.load(tmp_path / "nowhere")


def test_explicit_language_is_a_hard_filter(small, encoder):
    _, index_dir, _ = small
    index = PassageIndex.load(index_dir)
    q = encoder.encode_queries(["how fast does an eagle travel"])[0]
    for lang in ("en", "hi", "gu", "te"):
        hits = retrieve(index, q, lang, 5, is_explicit=True)
        assert hits and {h.passage.lang for h in hits} == {lang}


def test_auto_language_adds_bonus_only_to_same_language(small, encoder):
    _, index_dir, _ = small
    index = PassageIndex.load(index_dir)
    q = encoder.encode_queries(["ગરુડ કેટલી ઝડપથી મુસાફરી કરે છે"])[0]
    hits = retrieve(index, q, "gu", 5, is_explicit=False, language_bonus=0.03, pool_factor=3)
    for h in hits:
        expected_bonus = 0.03 if h.passage.lang == "gu" else 0.0
        assert h.rank_score == pytest.approx(h.score + expected_bonus)
    assert [h.rank_score for h in hits] == sorted((h.rank_score for h in hits), reverse=True)
    no_bonus = retrieve(index, q, "gu", 5, is_explicit=False, language_bonus=0.0)
    n_gu = sum(h.passage.lang == "gu" for h in hits)
    assert n_gu >= sum(h.passage.lang == "gu" for h in no_bonus)
