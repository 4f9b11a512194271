"""The answer decision, in one home: which sentence answers, how sure the project is of it.

- ``signals.py``: what is decided on (:class:`GateFeatures`, :class:`ReaderScores`, how the
  question was put);
- ``gate.py``: the fitted models, typed (:class:`GateModels`, :class:`LogisticModel`), and the
  rules from probability to verdict, written once over arrays (the product decides one row,
  ``scripts/fit_answering.py`` many, through the same functions);
- ``readers.py``: the :class:`Reader` protocol and which reader reads which language;
- ``stage.py``: :class:`AnswerStage`, select → read → re-pick → gate for the pipeline.

It builds on ``rag/selection.py`` (the candidate sentences and their selector), the two readers
(``rag/reader.py``, ``rag/student_reader.py``) and ``rag/types.py``; none of those imports it
back (``tests/test_layout.py``). ``rag/pipeline.py`` keeps retrieval, the guards and the trace.
"""

from rag.answer.gate import MODEL_PATH, GateModels, GateVerdict, LogisticModel
from rag.answer.readers import READER_OF, Reader, check_readers, load_readers
from rag.answer.signals import (
    FEATURES,
    READER_FEATURES,
    SCREEN_FEATURES,
    GateFeatures,
    QuestionStyle,
    ReaderScores,
    gate_features,
    question_style,
    reader_signals,
)
from rag.answer.stage import Answering, AnswerStage, repick

__all__ = [
    "FEATURES", "MODEL_PATH", "READER_FEATURES", "READER_OF", "SCREEN_FEATURES", "AnswerStage",
    "Answering", "GateFeatures", "GateModels", "GateVerdict", "LogisticModel", "QuestionStyle",
    "Reader", "ReaderScores", "check_readers", "gate_features", "load_readers",
    "question_style", "reader_signals", "repick",
]
