"""Three answers, not two (issue 31): a hedged answer (``Status.HEDGED``) from the gate's
three-way verdict to the reply text, the voice note, ``--json``, ``/why``, the decision log, the
dashboard and ``/metrics``; the hedge rule of scripts/fit_answering.py; the reader's files
checked at start-up (missing or altered: one line naming the command)."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from bot.chat.render import PLAIN, render_result_text, render_trace
from bot.chat.voice_reply import speech_for
from bot.dashboard import DashboardSettings, create_app
from rag.answer import MODEL_PATH, GateFeatures, GateModels, LogisticModel, reader_signals
from rag.answer.gate import pick_order
from rag.errors import ModelFileError, ReaderUnavailableError
from rag.reader import MARKER_FILE, READER_FILES, CrossEncoderReader, reader_problem
from rag.types import Citation, Reason, ReasonCode, Result, Status, Trace
from storage.db import Database

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

ANSWER = "The Xbox 360 costs about $200 in most shops."


def hedged_result(lang: str = "en") -> Result:
    trace = Trace()
    trace.add("reader", "read", "reader pick 2.10, best 3.40, margin 1.30, agrees 0; "
              "scores [2.10, 3.40]", 31.0)
    trace.add("answerability_gate", "hedged", "p 0.420 < threshold 0.700, >= hedge threshold "
              "0.300", 4.0)
    return Result(Status.HEDGED, "How much does an Xbox 360 cost?", lang, answer=ANSWER,
                  answer_lang="en", top_score=0.88, floor=0.84, trace=trace,
                  citations=[Citation("en-1-0", "en", 0.88, ANSWER)],
                  message="hedged: p 0.420 < threshold 0.700, >= hedge threshold 0.300",
                  reason=Reason(ReasonCode.HEDGED, "hedged", score=0.88, floor=0.84, lang=lang,
                                probability=0.42, threshold=0.7))


FEATURES = GateFeatures(0.9, 0.05, 0.8, 0.5, 0.0, 0.2, 0.6, 0.9)


# ------------------------------------------------------------------- the gate's verdict


def _gate_at(probability: float, threshold: float, hedge: float | None) -> GateModels:
    """A gate whose full model gives ``probability`` whatever the signals (never screened)."""
    n = len(FEATURES.vector())
    model = LogisticModel(np.zeros(n), np.ones(n), np.zeros(n),
                          float(np.log(probability / (1 - probability))), threshold, hedge)
    screen = replace(model, mean=np.zeros(n - 1), scale=np.ones(n - 1), coef=np.zeros(n - 1))
    return GateModels({"all": model}, {"all": screen}, screen_band=1.0)


def test_a_probability_between_the_hedge_and_confident_thresholds_is_hedged():
    assert _gate_at(0.75, 0.7, 0.4).verdict(FEATURES, "en").decision == "passed"
    hedged = _gate_at(0.5, 0.7, 0.4).verdict(FEATURES, "en")
    assert hedged.is_hedged and not hedged.is_answerable and hedged.decision == "hedged"
    assert ">= hedge threshold 0.400" in hedged.detail
    assert _gate_at(0.39, 0.7, 0.4).verdict(FEATURES, "en").decision == "refused"
    # no hedge threshold: nothing is hedged (the behaviour before issue 31)
    assert _gate_at(0.5, 0.7, None).verdict(FEATURES, "en").decision == "refused"


def test_the_screen_does_not_decide_alone_near_the_hedge_threshold():
    gate = GateModels.load()
    lang = "hi"
    # a screen whose probability is 0.5 whatever the signals, so that both thresholds can be
    # set a band's width either side of it (the shipped one's may sit within a band of 0 or 1)
    screen = replace(gate.screen[lang], coef=np.zeros_like(gate.screen[lang].coef), intercept=0.0)
    p = float(screen.probability(FEATURES.vector()[:-1])[0])
    assert p == 0.5
    near = replace(screen, threshold=min(1.0, p + 0.5), hedge_threshold=p - 0.01)
    far = replace(near, hedge_threshold=max(0.0, p - 0.4))
    unembedded = replace(FEATURES, answer_cosine=None)
    assert replace(gate, screen={**gate.screen, lang: near}).verdict(unembedded, lang) is None
    verdict = replace(gate, screen={**gate.screen, lang: far}).verdict(unembedded, lang)
    assert verdict is not None and verdict.screened and verdict.is_hedged


def test_a_gate_file_with_a_hedge_threshold_above_its_threshold_stops_start_up(tmp_path):
    data = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    data["models"]["all"]["hedge_threshold"] = data["models"]["all"]["threshold"] + 0.1
    path = tmp_path / "gate_model.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ModelFileError, match="hedge_threshold.*fit_answering"):
        GateModels.load(path)


def test_the_pick_weighs_the_selectors_and_the_readers_logits():
    probabilities, scores = [0.9, 0.5, 0.2], [-3.0, 5.0, 6.0]
    # combined: ln(9) - 3 = -0.80, 0 + 5 = 5.00, ln(0.25) + 6 = 4.61
    assert pick_order(probabilities, scores, [1.0, 1.0]) == [1, 2, 0]
    assert pick_order(probabilities, scores, [1.0, 0.0]) == [0, 1, 2]  # the selector alone
    assert pick_order(probabilities, scores, [0.0, 1.0]) == [2, 1, 0]  # the reader alone
    assert pick_order([1.0, 0.0], [1.0, 1.0], [0.0, 0.0]) == [0, 1]  # ties keep its order


def test_a_gate_file_with_malformed_pick_weights_stops_start_up(tmp_path):
    data = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    lang = next(iter(data["reader_models"]))
    data["reader_models"][lang]["pick"] = [1.0]
    path = tmp_path / "gate_model.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ModelFileError, match=rf"reader_models\['{lang}'\]\['pick'\] is not a "
                                             r"list of 2 numbers.*fit_answering"):
        GateModels.load(path)


def test_reader_signals_name_the_pick_the_best_and_whether_they_agree():
    disagree = reader_signals([2.0, 5.5, -1.0])
    assert (disagree.reader_pick, disagree.reader_best, disagree.reader_margin,
            disagree.reader_agrees) == (2.0, 5.5, 3.5, 0.0)
    agree = reader_signals([6.0, 1.0])
    assert agree.reader_agrees == 1.0 and agree.reader_margin == 5.0
    assert reader_signals([]).vector().tolist() == [0.0, 0.0, 0.0, 0.0]


# ------------------------------------------------------------- what the user is shown


def test_hedged_reply_says_not_sure_and_cites_the_closest_passage():
    text = render_result_text(hedged_result(), "en")
    assert f"I'm not sure this answers it; the closest passage says: {ANSWER} [1]" in text
    assert "en-1-0" in text  # the passage [1] points at
    confident = render_result_text(replace(hedged_result(), status=Status.ANSWERED), "en")
    assert "not sure" not in confident and ANSWER in confident


@pytest.mark.parametrize(("lang", "words"), [("hi", "पक्का नहीं"), ("gu", "ખાતરી નથી"),
                                             ("te", "ఖచ్చితంగా తెలియదు")])
def test_hedged_reply_is_worded_in_the_users_language(lang, words):
    text = render_result_text(hedged_result(lang), lang)
    assert words in text and ANSWER in text and "[1]" in text


def test_the_voice_note_of_a_hedged_answer_says_the_hedge_too():
    speech = speech_for(hedged_result(), "en", "on", is_voice_question=True)
    assert speech.text == f"I'm not sure this answers it; the closest passage says: {ANSWER}"
    hindi = speech_for(hedged_result("hi"), "hi", "on", is_voice_question=True)
    assert hindi.lang == "hi" and hindi.text.startswith("मुझे पक्का नहीं")


def test_json_and_why_show_the_hedged_status_and_the_readers_scores():
    result = hedged_result()
    data = json.loads(json.dumps(result.to_dict()))
    assert data["status"] == "hedged" and data["answer"] == ANSWER
    assert data["reason"]["code"] == "hedged" and data["reason"]["probability"] == 0.42
    assert result.shows_answer and not result.is_answered and not result.status.is_refusal
    why = PLAIN.render(render_trace(result.trace, "en"))
    assert "reader — read: reader pick 2.10, best 3.40" in why
    assert "answerability_gate — hedged" in why


async def test_the_decision_log_dashboard_and_metrics_show_hedged(tmp_path):
    db_path = tmp_path / "bot.sqlite3"
    async with await Database.open(db_path) as db:
        hedged_id = await db.record_decision("telegram", 7, 1, 7, "text", hedged_result())
        await db.record_decision("telegram", 7, 2, 7, "text", replace(
            hedged_result(), status=Status.ANSWERED, reason=None, message=""))
        assert await db.refusals() == []  # a hedged answer is not a refusal
    settings = DashboardSettings(db_path=db_path, index_dir=tmp_path / "none")
    async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as http:
        listed = await (await http.get("/?status=hedged")).text()
        page = await (await http.get(f"/decision/{hedged_id}")).text()
        metrics = await (await http.get("/metrics")).text()
    assert 'class="badge status-hedged">hedged<' in listed and "$200" in listed
    assert "not sure" in page and ANSWER.replace("$", "$") in page and "<b>hedged</b>" in page
    samples = {(s.labels["status"], s.labels["reason"]): s.value
               for f in text_string_to_metric_families(metrics) if f.name == "voice_rag_questions"
               for s in f.samples if s.name == "voice_rag_questions_total"}
    assert samples == {("hedged", "hedged"): 1.0, ("answered", "none"): 1.0}


# ------------------------------------------------------------------ the hedge rule


def test_the_hedge_threshold_stops_where_the_band_holds_the_fact_less_than_half_the_time():
    from operating_points import choose_hedge

    # natural questions by probability: right above 0.4, mostly wrong below 0.3
    p = np.round(np.linspace(0.05, 0.69, 65), 2)
    y = np.where(p >= 0.4, 1, (np.arange(65) % 4 == 0).astype(int))
    kinds = np.array(["answerable"] * 65)
    hedge = choose_hedge(p, y, kinds, 0.7, 0)
    band = (p >= hedge) & (p < 0.7)
    assert y[band].mean() >= 0.5 and 0.2 < hedge <= 0.4
    # an off-corpus question at 0.5 stops the scan there: never an answer to one of them
    p2, y2 = np.append(p, 0.5), np.append(y, 0)
    kinds2 = np.append(kinds, "off_corpus")
    assert choose_hedge(p2, y2, kinds2, 0.7, 10) > 0.5
    # not-in-corpus dataset queries count against the band's share: twenty of them at 0.45
    # pull the band's lower edge under one half, so hedging stops above them
    p3 = np.concatenate([p, np.full(20, 0.45)])
    y3, kinds3 = np.append(y, np.zeros(20, int)), np.append(kinds, ["not_in_corpus"] * 20)
    assert choose_hedge(p3, y3, kinds3, 0.7, 0) > 0.45


def test_the_style_report_follows_each_answer_from_the_floor_to_the_gate():
    from types import SimpleNamespace

    from answering_report import style_report
    from fit_answering import Item

    def selection(*texts):
        ranked = [SimpleNamespace(text=t) for t in texts]
        return SimpleNamespace(text=texts[0], ranked=ranked)

    items = [Item("q1", "hi", "answerable", 1, "मासा", "spoken"),  # refused by the floor
             Item("q2", "hi", "answerable", 2, "मासा", "spoken"),  # read, picked, confident
             Item("q3", "hi", "answerable", 3, "मासा", "spoken"),  # read, not picked, hedged
             Item("q4", "hi", "answerable", 4, "मासा", "spoken"),  # not among those read
             Item("q5", "hi", "near_miss", 5, "", "spoken"),  # near-misses are not counted
             Item("q6", "hi", "answerable", 6, "मासा", "typed")]
    picked, missed = selection("मासा है", "चूना"), selection("चूना", "मासा है")
    decided = {
        1: {"selection": picked, "read": (picked.ranked, [5.0, 1.0]), "answered": True,
            "hedged": False},
        2: {"selection": missed, "read": (missed.ranked, [1.0, 0.5]), "answered": False,
            "hedged": True},
        3: {"selection": missed, "read": (missed.ranked[:1], [1.0]), "answered": True,
            "hedged": False},
        4: {"selection": missed, "answered": True, "hedged": False},
        5: {"selection": picked, "answered": False, "hedged": True},
    }
    spoken = style_report(items, decided)["hi"]["spoken"]
    assert spoken == {"n": 4, "floor_refused": 0.25, "span_read": 0.5, "no_gate": 0.25,
                      "delivered": 0.25, "confident": 0.25, "wrong": 0.25}
    typed = style_report(items, decided)["hi"]["typed"]  # nothing read: every candidate counts
    assert typed == {"n": 1, "floor_refused": 0.0, "span_read": 1.0, "no_gate": 1.0,
                     "delivered": 1.0, "confident": 0.0, "wrong": 0.0}


# ------------------------------------------------------------ the reader's files


def fake_reader_folder(folder: Path) -> Path:
    folder.mkdir()
    for name in READER_FILES:
        (folder / name).write_bytes(b"not the model")
    (folder / MARKER_FILE).write_text(json.dumps({"files": READER_FILES}), encoding="utf-8")
    return folder


def test_a_missing_or_altered_reader_file_stops_start_up_naming_the_command(tmp_path):
    with pytest.raises(ReaderUnavailableError, match=r"no complete reader.*"
                       r"`python3 -m ragtools build-encoder`"):
        CrossEncoderReader(tmp_path / "nothing")
    altered = fake_reader_folder(tmp_path / "altered")
    with pytest.raises(ReaderUnavailableError, match=r"model.onnx is corrupt.*build-encoder"):
        CrossEncoderReader(altered)
    (altered / "model.onnx").unlink()
    assert "model.onnx is missing" in reader_problem(altered)
    shutil.rmtree(altered)
    assert reader_problem(altered).startswith("no complete reader")


def test_the_bot_stops_with_one_line_when_the_reader_is_missing(tmp_path, monkeypatch, capsys):
    from bot.cli import main as bot_main

    if not GateModels.load().reader_models:
        pytest.skip("the shipped gate has no reader model")
    # the reader is checked before the encoder and the index are loaded (Pipeline.from_settings)
    monkeypatch.setenv("VOICE_RAG_READER_DIR", str(tmp_path / "no-reader"))
    assert bot_main(["ask", "How much does an Xbox 360 cost?"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "no complete reader" in err[0]
    assert "`python3 -m ragtools build-encoder`" in err[0]
