"""Build the passage corpus from the HuggingFace dataset ``ai4bharat/MSMARCO-XI``.

Real hub layout (from the repository's file listing as reported by several public projects
that read it; the hub itself cannot be reached from the machines this was written on):

- There are **no per-language configs**. The repository holds one parquet file per language and
  split: ``validation/hinval.parquet``, ``validation/gujval.parquet``,
  ``validation/telval.parquet`` (~0.43-0.47 GB each, 97,941 rows each, a single row group), and
  ``train/<code>train.parquet`` (~3.5 GB; Telugu has no train file). The repository's loading
  script ``ms_marco_translations.py`` points at ``.jsonl`` files that no longer exist, so
  ``load_dataset("ai4bharat/MSMARCO-XI", "hi")`` does not work; we load the parquet files
  through the generic ``parquet`` builder with ``hf://`` paths, streaming.
- Row schema: ``query_id`` (int64), ``query``, ``query_type``, ``Eng_Query``, ``Answer``,
  ``Eng_Answer``, ``source_lang`` (``eng_Latn``), ``target_lang`` (``hin_Deva``,
  ``guj_Gujr``, ``tel_Telu``), ``meta`` (translation settings), and ``passages``: a struct of
  three **parallel lists** ``English_passages`` (list[str]), ``Translated_passages``
  (list[str]) and ``is_selected`` (list[int64], 1 = the passage MS MARCO's annotator used),
  all indexed by the same passage position.
- There is **no English file**: every row carries its original ``English_passages``. English
  passages are taken from the Hindi file (``ENGLISH_SOURCE``) in the same pass that reads the
  Hindi translations, so ``en-Q-i`` and ``hi-Q-i`` come from the very same row.

Passage ids are ``{lang}-{query_id}-{passage_index}``; ``passage_index`` is the position in the
row's passage lists and matches across languages.

Streaming caveat: each validation file is one parquet row group, so reading even the first row
fetches that row group's column data (roughly the whole file, ~0.45 GB per language); streaming
still avoids keeping the file on disk and stops as soon as the per-language cap is reached.
"""

from __future__ import annotations

import gc
import os
import tempfile
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from rag.corpus import write_passages
from rag.errors import CorpusError
from rag.types import LANGUAGES, Passage

DATASET_ID = "ai4bharat/MSMARCO-XI"
"""HuggingFace dataset repository."""

HF_BASE = f"hf://datasets/{DATASET_ID}"
"""fsspec root of the dataset repository (``@revision`` is appended when one is pinned)."""

SPLIT = "validation"
"""The split the corpus is built from (10,000 passages per language by default)."""

FILE_CODES: dict[str, str] = {"hi": "hin", "gu": "guj", "te": "tel"}
"""Our language code -> the three-letter prefix of the dataset's parquet files."""

TARGET_LANGS: dict[str, str] = {"hi": "hin_Deva", "gu": "guj_Gujr", "te": "tel_Telu"}
"""Our language code -> the dataset's ``target_lang`` value for that file's rows."""

ENGLISH_SOURCE = "hi"
"""Language file whose rows' ``English_passages`` become the English corpus."""

FALLBACK_CORPUS = "../shared/data/msmarco-xi-sample/corpus.jsonl"
"""Corpus to use when the hub cannot be reached (relative to the project root)."""

HUB_TIMEOUT_S = 5.0
"""Seconds the reachability check waits for the hub before giving up."""

LoadRows = Callable[[str], Iterable[Mapping[str, Any]]]


def data_file(lang: str, base: str = HF_BASE, revision: str | None = None) -> str:
    """Path of a language's validation parquet, e.g. ``hf://datasets/.../validation/hinval.parquet``.

    ``base`` may be a local folder laid out like the repository (used by tests).

    Raises:
        ValueError: ``lang`` has no parquet file (``en`` has none: see ``ENGLISH_SOURCE``).
    """
    if lang not in FILE_CODES:
        raise ValueError(
            f"no MSMARCO-XI file for language {lang!r}; files exist for {sorted(FILE_CODES)}"
        )
    root = f"{base}@{revision}" if revision else base
    return f"{root}/{SPLIT}/{FILE_CODES[lang]}val.parquet"


def source_language(lang: str) -> str:
    """The dataset file a corpus language is read from: ``en`` -> ``hi``, others -> themselves."""
    return ENGLISH_SOURCE if lang == "en" else lang


def _endpoint() -> str:
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover
        return "the hub"
    return constants.ENDPOINT


def _unreachable(detail: str) -> CorpusError:
    return CorpusError(
        f"cannot read {DATASET_ID} from the HuggingFace hub ({detail}); "
        f"the offline sample is at {FALLBACK_CORPUS}; set VOICE_RAG_CORPUS_PATH to use "
        "another passage file"
    )


def _row_passages(row: Mapping[str, Any], lang: str) -> Iterator[Passage]:
    """Passages of one dataset row in ``lang`` (empty ones skipped; no de-duplication)."""
    try:
        query_id = int(row["query_id"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CorpusError(f"dataset row without a usable query_id: {exc!r}") from exc
    if lang != "en":
        target = row.get("target_lang")
        if target is not None and target != TARGET_LANGS[lang]:
            raise CorpusError(
                f"row {query_id} is in {target}, not {TARGET_LANGS[lang]}: wrong file for {lang!r}"
            )
    block = row.get("passages")
    if block is None:
        return
    if isinstance(block, Mapping):  # the dataset's shape: a struct of parallel lists
        key = "English_passages" if lang == "en" else "Translated_passages"
        texts = list(block.get(key) or [])
        selected = list(block.get("is_selected") or [])
    elif isinstance(block, list):  # list of per-passage dicts (some converters produce this)
        key = "English_passages" if lang == "en" else "Translated_passages"
        texts = [p.get(key) if isinstance(p, Mapping) else None for p in block]
        selected = [p.get("is_selected", 0) if isinstance(p, Mapping) else 0 for p in block]
    else:
        raise CorpusError(f"row {query_id}: passages is a {type(block).__name__}, not a struct")
    for index, raw in enumerate(texts):
        if not isinstance(raw, str):
            continue
        text = unicodedata.normalize("NFC", raw).strip()
        if not text:
            continue
        yield Passage(
            id=f"{lang}-{query_id}-{index}",
            lang=lang,
            text=text,
            query_id=query_id,
            passage_index=index,
            is_selected=bool(selected[index]) if index < len(selected) else False,
        )


def rows_to_passages(rows: Iterable[Mapping[str, Any]], lang: str) -> Iterator[Passage]:
    """Turn MSMARCO-XI rows into passages of one language, lazily.

    Args:
        rows: dataset rows (dicts in the dataset's schema, see the module docstring).
        lang: ``en`` takes each row's ``English_passages``; ``hi``/``gu``/``te`` take its
            ``Translated_passages`` (the rows must come from that language's file).

    Yields:
        Passages with id ``{lang}-{query_id}-{passage_index}``, text NFC-normalised and trimmed,
        ``is_selected`` from the row; empty passages and repeated ids are skipped.

    Raises:
        ValueError: ``lang`` is not one of en/hi/gu/te.
        CorpusError: a row has no usable ``query_id``, a malformed ``passages`` field, or a
            ``target_lang`` of another language.
    """
    if lang not in LANGUAGES:
        raise ValueError(f"language {lang!r} not in {LANGUAGES}")
    seen: set[str] = set()
    for row in rows:
        for passage in _row_passages(row, lang):
            if passage.id not in seen:
                seen.add(passage.id)
                yield passage


def check_hub(timeout: float = HUB_TIMEOUT_S, revision: str | None = None,
              languages: Iterable[str] = ("hi", "gu", "te")) -> None:
    """Fail fast when the hub is unreachable or the expected files are missing.

    One metadata request (``HfApi.dataset_info``) with a hard deadline of ``timeout`` seconds
    (the HTTP client may retry a timed-out request, so the deadline is enforced by waiting on a
    daemon thread); honours ``HF_ENDPOINT``, ``HF_HUB_OFFLINE`` and ``HF_TOKEN`` as
    huggingface_hub does.

    Raises:
        CorpusError: the hub cannot be reached in time, refuses the request, or the repository
            lacks a language's validation parquet; the message names the offline fallback.
    """
    try:
        from huggingface_hub import HfApi
    except ImportError as exc:  # pragma: no cover - huggingface_hub ships with datasets
        raise _unreachable("huggingface_hub is not installed: pip install '.[hub]'") from exc
    outcome: dict[str, Any] = {}

    def ask() -> None:
        try:
            outcome["info"] = HfApi().dataset_info(DATASET_ID, revision=revision, timeout=timeout)
        except Exception as exc:  # httpx errors, HfHubHTTPError, OfflineModeIsEnabled...
            outcome["error"] = exc

    worker = threading.Thread(target=ask, name="hub-check", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise _unreachable(f"no answer from {_endpoint()} within {timeout:g} s")
    if "error" in outcome:
        exc = outcome["error"]
        raise _unreachable(f"{type(exc).__name__}: {exc}") from exc
    info = outcome["info"]
    present = {s.rfilename for s in (info.siblings or [])}
    if present:
        wanted = {data_file(source_language(x), base="").lstrip("/") for x in languages}
        missing = sorted(wanted - present)
        if missing:
            raise _unreachable(f"files missing from the repository: {', '.join(missing)}")


def hub_rows(lang: str, *, base: str = HF_BASE, revision: str | None = None,
             batch_size: int = 256) -> Iterator[dict]:
    """Stream the rows of one language's validation parquet with ``datasets`` (no full download).

    Args:
        lang: ``hi``, ``gu`` or ``te`` (the file to read; English lives in the Hindi file).
        base: repository root; a local folder with the same layout works too (tests use one).
        revision: a commit/branch of the dataset repository, or None for ``main``.
        batch_size: rows per Arrow batch decoded at a time.

    Yields:
        Rows as dicts (``passages`` as a dict of parallel lists).

    Raises:
        CorpusError: the file cannot be opened or read (network down, hub error, missing
            ``datasets`` package); the message names the offline fallback.
    """
    path = data_file(lang, base=base, revision=revision)
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise _unreachable("the `datasets` package is not installed: pip install '.[hub]'") from exc
    try:
        stream = load_dataset(
            "parquet", data_files={"train": path}, split="train", streaming=True,
            columns=["query_id", "target_lang", "passages"], batch_size=batch_size,
        )
        rows = iter(stream)
    except Exception as exc:  # network, HTTP, parquet errors, whatever the transport raises
        raise _unreachable(f"reading {path}: {type(exc).__name__}: {exc}") from exc
    try:
        yield from rows
    except Exception as exc:
        raise _unreachable(f"reading {path}: {type(exc).__name__}: {exc}") from exc
    finally:
        # A stream read only in part (the caller stops at its per-language count) must be torn
        # down now, while Arrow is alive: left to the interpreter's exit, pyarrow's parquet
        # scanner aborts the process ("terminate called without an active exception", exit
        # -6, seen once in a loaded CI run of tests/test_hub.py; huggingface/datasets#7566,
        # apache/arrow#45214).
        close = getattr(rows, "close", None)
        if close is not None:
            close()
        del rows, stream
        gc.collect()


def fetch_corpus(
    out_path: Path,
    per_language: int = 10_000,
    languages: Iterable[str] = ("en", "hi", "gu", "te"),
    load_rows: LoadRows | None = None,
    *,
    align: bool = True,
    revision: str | None = None,
    timeout: float = HUB_TIMEOUT_S,
    progress: bool = True,
) -> dict[str, int]:
    """Write up to ``per_language`` passages per language from the validation split as JSONL.

    Each dataset file is read once and only until every language drawn from it has its
    ``per_language`` passages: English and Hindi both come from the Hindi file
    (``ENGLISH_SOURCE``), Gujarati and Telugu from their own. The output is written to a temp
    file beside ``out_path`` and renamed over it only on success, so a failed fetch leaves any
    previous corpus intact.

    Args:
        out_path: JSONL file to (over)write, in the format of ``rag.corpus``.
        per_language: cap on passages per language (>= 1).
        languages: any of en/hi/gu/te.
        load_rows: ``source_lang -> rows`` (called with ``hi``, ``gu`` or ``te``, never ``en``);
            None streams from the hub after a reachability check of at most ``timeout`` s.
        align: keep Gujarati/Telugu rows only for query ids already taken from the Hindi file,
            so that every passage has parallel siblings (the files hold the same 97,941
            queries; this guards against a different row order). No effect without en/hi.
        revision: dataset repository revision for the hub loader.
        timeout: seconds for the hub reachability check.
        progress: show a tqdm progress bar on stderr.

    Returns:
        Passages written per requested language, e.g. ``{"en": 10000, "hi": 10000, ...}``.

    Raises:
        ValueError: ``per_language`` < 1 or an unknown language.
        CorpusError: the hub is unreachable (message names ``FALLBACK_CORPUS``), a row is
            malformed, or a language yields no passage at all; ``out_path`` is then untouched.
    """
    wanted = list(dict.fromkeys(languages))
    unknown = [x for x in wanted if x not in LANGUAGES]
    if unknown or not wanted:
        raise ValueError(f"languages must be a non-empty subset of {LANGUAGES}, got {wanted}")
    if per_language < 1:
        raise ValueError(f"per_language must be >= 1, got {per_language}")
    if load_rows is None:
        check_hub(timeout=timeout, revision=revision, languages=wanted)

        def rows_of(source: str) -> Iterable[Mapping[str, Any]]:
            return hub_rows(source, revision=revision)
    else:
        rows_of = load_rows

    # source file -> languages read from it, in a fixed order (Hindi file first).
    plan: dict[str, list[str]] = {}
    for src in ("hi", "gu", "te"):
        targets = [x for x in wanted if source_language(x) == src]
        if targets:
            plan[src] = targets
    counts = {x: 0 for x in wanted}

    from tqdm.auto import tqdm

    bar = tqdm(total=per_language * len(wanted), unit="passage", desc="MSMARCO-XI",
               disable=not progress)

    def passages() -> Iterator[Passage]:
        anchor: set[int] = set()  # query ids taken from the Hindi file
        for src, targets in plan.items():
            bar.set_description(f"{FILE_CODES[src]}val -> {'+'.join(targets)}")
            restrict = align and src != ENGLISH_SOURCE and bool(anchor)
            seen: set[str] = set()
            for row in rows_of(src):
                for lang in targets:
                    for p in _row_passages(row, lang):
                        if counts[lang] >= per_language:
                            break
                        if p.id in seen or (restrict and p.query_id not in anchor):
                            continue
                        seen.add(p.id)
                        counts[lang] += 1
                        bar.update(1)
                        if src == ENGLISH_SOURCE:
                            anchor.add(p.query_id)
                        yield p
                if all(counts[x] >= per_language for x in targets):
                    break  # stop before pulling another row from the stream

    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out_path.name}.", suffix=".tmp", dir=out_path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write_passages(tmp, passages())
        empty = [x for x in wanted if counts[x] == 0]
        if empty:
            raise CorpusError(f"no passages found for {', '.join(empty)} in {DATASET_ID}")
        tmp.chmod(0o644)  # mkstemp makes it owner-only; a corpus is an ordinary data file
        os.replace(tmp, out_path)
    finally:
        bar.close()
        tmp.unlink(missing_ok=True)
    return counts
