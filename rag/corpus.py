"""The one passage format: JSONL, one :class:`~rag.types.Passage` per line.

``{"id": "hi-1102432-5", "lang": "hi", "text": "...", "query_id": 1102432,
"passage_index": 5, "is_selected": false}`` (the format of ../shared/data).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from rag.errors import CorpusError
from rag.types import LANGUAGES, Passage


def read_passages(path: Path) -> list[Passage]:
    """Read a passage JSONL file.

    Raises:
        CorpusError: the file is missing, a line is not JSON, a field is missing, a language is
            not one of en/hi/gu/te, or an id repeats.
    """
    path = Path(path)
    if not path.is_file():
        raise CorpusError(
            f"corpus not found at {path}: fetch it with `python scripts/fetch_corpus.py` "
            "or point VOICE_RAG_CORPUS_PATH at ../shared/data/msmarco-xi-sample/corpus.jsonl"
        )
    passages: list[Passage] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                passage = Passage(
                    id=str(row["id"]), lang=str(row["lang"]), text=str(row["text"]),
                    query_id=int(row["query_id"]), passage_index=int(row["passage_index"]),
                    is_selected=bool(row.get("is_selected", False)),
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise CorpusError(f"{path}:{line_no}: not a passage ({exc})") from exc
            if passage.lang not in LANGUAGES:
                raise CorpusError(f"{path}:{line_no}: language {passage.lang!r} not in {LANGUAGES}")
            if passage.id in seen:
                raise CorpusError(f"{path}:{line_no}: duplicate id {passage.id}")
            seen.add(passage.id)
            passages.append(passage)
    if not passages:
        raise CorpusError(f"{path} holds no passages")
    return passages


def write_passages(path: Path, passages: Iterable[Passage]) -> int:
    """Write passages as JSONL (UTF-8, not ASCII-escaped); returns how many were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for p in passages:
            fh.write(json.dumps(
                {"id": p.id, "lang": p.lang, "text": p.text, "query_id": p.query_id,
                 "passage_index": p.passage_index, "is_selected": p.is_selected},
                ensure_ascii=False) + "\n")
            n += 1
    return n


def corpus_hash(passages: Iterable[Passage]) -> str:
    """SHA-256 over ids and texts in order: identifies the corpus an index was built from."""
    h = hashlib.sha256()
    for p in passages:
        h.update(p.id.encode())
        h.update(b"\0")
        h.update(p.text.encode())
        h.update(b"\n")
    return h.hexdigest()
