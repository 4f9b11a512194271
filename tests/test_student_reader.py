"""The multilingual student reader (rag/student_reader.py, issue 32) on real sentences: Hindi
training questions it never trained on (first written in Hindi: ``ragtools/student_data.py``
holds them out) against the sentences of their own passage and another topic's, beside e5's
cosine on the same sentences. Needs the built folder (``python -m ragtools build-encoder``, as
``.ci/run`` runs before the tests; built here if missing), so these are slow tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rag.errors import ReaderUnavailableError
from rag.selection import sentences_of
from rag.student_reader import HEAD_FILE, StudentReader, default_student_dir
from ragtools.student import ensure_student

ROOT = Path(__file__).resolve().parents[1]
N_QUESTIONS = 60

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def student() -> StudentReader:
    return StudentReader(ensure_student())


def hindi_cases(sample_passages) -> list[tuple[str, str, list[str]]]:
    """(question, the sentence holding its span, the other sentences of its passage) for the
    first :data:`N_QUESTIONS` Hindi typed answerable training questions whose span lies in one
    sentence of a passage of at least three sentences."""
    by_id = {p.id: p for p in sample_passages}
    cases = []
    for row in map(json.loads, (ROOT / "eval" / "training" / "hi_a.jsonl").open(encoding="utf-8")):
        if row["kind"] != "answerable" or row["style"] != "typed" or row["passage_id"] not in by_id:
            continue
        sentences = sentences_of(by_id[row["passage_id"]].text)
        right = [s for s in sentences if row["answer"] in s]
        if len(right) == 1 and len(sentences) >= 3:
            cases.append((row["question"], right[0], [s for s in sentences if s != right[0]]))
        if len(cases) == N_QUESTIONS:
            break
    return cases


def test_the_hindi_answer_sentence_outscores_another_topics(student, sample_passages):
    cases = hindi_cases(sample_passages)
    assert len(cases) == N_QUESTIONS
    wins = []
    for k, (question, right, _) in enumerate(cases):
        unrelated = cases[(k + N_QUESTIONS // 2) % N_QUESTIONS][1]
        right_score, unrelated_score = student.score(question, [right, unrelated])
        wins.append(right_score > unrelated_score)
    assert np.mean(wins) >= 0.9


def test_it_finds_the_hindi_answer_in_its_passage_more_often_than_e5(student, sample_passages,
                                                                    encoder):
    top1_student, top1_e5 = [], []
    for question, right, others in hindi_cases(sample_passages):
        texts = [right, *others]
        top1_student.append(int(np.argmax(student.score(question, texts))) == 0)
        cosines = np.asarray(encoder.encode_passages(texts)) @ encoder.encode_queries([question])[0]
        top1_e5.append(int(np.argmax(cosines)) == 0)
    assert np.mean(top1_student) > np.mean(top1_e5), (np.mean(top1_student), np.mean(top1_e5))


def test_a_folder_built_from_other_weights_stops_start_up_naming_the_command(tmp_path):
    stale = tmp_path / "student"
    shutil.copytree(default_student_dir(), stale)
    head = json.loads((stale / HEAD_FILE).read_text(encoding="utf-8"))
    (stale / HEAD_FILE).write_text(json.dumps({**head, "weights_sha256": "0" * 64}),
                                   encoding="utf-8")
    with pytest.raises(ReaderUnavailableError, match=r"other weights.*ragtools build-student"):
        StudentReader(stale)
    with pytest.raises(ReaderUnavailableError, match=r"no complete student reader"):
        StudentReader(tmp_path / "nothing")


def test_the_bot_stops_with_one_line_when_the_student_is_missing(tmp_path, monkeypatch, capsys):
    from bot.cli import main as bot_main
    from rag.student_reader import STUDENT_DIR_ENV

    # the readers are checked before the encoder and the index are loaded
    monkeypatch.setenv(STUDENT_DIR_ENV, str(tmp_path / "no-student"))
    assert bot_main(["ask", "छोटे खीरे में कितनी कैलोरी होती है?"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "no complete student reader" in err[0], err
    assert "`python3 -m ragtools build-student`" in err[0]
