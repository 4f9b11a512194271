"""The readers: models that score (question, candidate sentence) pairs, one per language read.

A reader is anything with a ``name`` and ``score(question, texts)`` (:class:`Reader`). Which one
reads which language is written here once (:data:`READER_OF`): English questions by the
pretrained English cross-encoder (``rag/reader.py``), Hindi, Gujarati and Telugu ones by its
multilingual student (``rag/student_reader.py``; the English reader's top-1 on them is near
chance: docs/encoders.md, "The English reader (issue 31)"). The pipeline holds them as
``readers: dict[lang, Reader]``, the fit (``scripts/fit_answering.py``) fits one gate model per
language and one set of re-pick weights per reader (:func:`reader_groups`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

import numpy as np


class Reader(Protocol):
    """Scores (question, text) pairs: ``score`` gives float32 (len(texts),) logits on the
    English cross-encoder's scale (MS MARCO relevance; ~+4 and above: the text answers)."""

    name: str

    def score(self, question: str, texts: list[str]) -> np.ndarray: ...


READER_OF = {"en": "english", "hi": "student", "gu": "student", "te": "student"}
"""The reader of each language's questions: ``english`` (rag/reader.py) or ``student``
(rag/student_reader.py)."""


def check_readers(langs: Iterable[str]) -> None:
    """Check the files of the readers of ``langs`` (sha256, completeness) before anything heavy
    loads, so a missing or altered file stops start-up at once.

    Raises:
        ReaderUnavailableError: one line naming the command that builds them.
    """
    from rag.errors import ReaderUnavailableError
    from rag.reader import BUILD_COMMAND, default_reader_dir, reader_problem
    from rag.student_reader import check_student

    kinds = {READER_OF[lang] for lang in langs if lang in READER_OF}
    problem = reader_problem(default_reader_dir()) if "english" in kinds else None
    if problem is not None:
        raise ReaderUnavailableError(f"{problem}: build it with `{BUILD_COMMAND}`")
    if "student" in kinds:
        check_student()


def load_readers(langs: Iterable[str], tokenizer=None) -> dict[str, Reader]:
    """The readers of ``langs`` (each loaded once, shared by its languages), by language;
    ``tokenizer`` the encoder's ``tokenizers.Tokenizer`` for the student (the same XLM-R
    vocabulary, held once), None to load its own.

    Raises:
        ReaderUnavailableError: a reader's files are missing or altered (named, with the build
            command).
    """
    from rag.reader import load_reader
    from rag.student_reader import StudentReader

    loaders = {"english": load_reader, "student": lambda: StudentReader(tokenizer=tokenizer)}
    loaded: dict[str, Reader] = {}
    readers: dict[str, Reader] = {}
    for lang in langs:
        kind = READER_OF.get(lang)
        if kind is None:
            continue
        if kind not in loaded:
            loaded[kind] = loaders[kind]()
        readers[lang] = loaded[kind]
    return readers


def reader_groups(langs: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The languages of ``langs`` grouped by their reader (:data:`READER_OF`), e.g.
    ``{"english": ("en",), "student": ("hi", "gu", "te")}``: one set of re-pick weights each."""
    groups: dict[str, list[str]] = {}
    for lang in langs:
        if lang in READER_OF:
            groups.setdefault(READER_OF[lang], []).append(lang)
    return {kind: tuple(group) for kind, group in groups.items()}


def reader_names(readers: Mapping[str, Reader]) -> str:
    """One line naming each reader and its languages, for logs."""
    by_name: dict[str, list[str]] = {}
    for lang, reader in readers.items():
        by_name.setdefault(reader.name, []).append(lang)
    return "; ".join(f"{name} ({'/'.join(langs)})" for name, langs in by_name.items())
