"""Hindi as people type and say it (issue 42, item 2): the corpus lexicon (rag/lexicon.py) that
reads Latin-letter Hindi and spells replies back in Latin letters, and the leading spoken
fillers (rag/text.py). The figures these levers move: docs/benchmarks.md, "Hindi found as
people ask it" (scripts/measure_hindi.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rag.language import read_language
from rag.lexicon import HindiLexicon, load_lexicon, spelling_key
from rag.romanized import LEXICON, to_devanagari, to_latin
from rag.text import strip_fillers

TRAINING = Path(__file__).resolve().parents[1] / "eval" / "training"
_DEVANAGARI = re.compile("[\u0900-\u097f]")


def test_the_shipped_lexicon_is_the_shared_samples_own(sample_passages):
    """rag/hindi_lexicon.json is what `python -m ragtools build-lexicon` builds from the
    shared sample: nothing edited by hand, nothing from the questions."""
    from ragtools.lexicon_build import build_lexicon

    built = build_lexicon(sample_passages, source="corpus.jsonl")
    shipped = load_lexicon()
    assert (built.native, built.loanwords, built.english) == (
        shipped.native, shipped.loanwords, shipped.english)
    assert len(shipped.native) > 10_000 and len(shipped.loanwords) > 1_000


@pytest.mark.parametrize("typed", ["keemat", "kimat", "kimmat", "Keemat"])
def test_spellings_of_one_word_meet_under_one_key(typed):
    assert spelling_key(typed) == "kimat"
    assert to_devanagari(f"xbox 360 ki {typed} kitni hai").endswith("की कीमत कितनी है")


@pytest.mark.parametrize(("typed", "corpus"), [
    ("gehu", "गेहूं"), ("padarth", "पदार्थ"), ("sasta", "सस्ता"), ("cheeni", "चीनी"),
    ("padhai", "पढ़ाई"), ("shareer", "शरीर"), ("kanoon", "कानून"), ("calorie", "कैलोरी"),
])
def test_latin_hindi_reaches_words_no_hand_list_has(typed, corpus):
    """Words of the Latin-letter training questions that the hand list (rag.romanized.LEXICON)
    lacks, read as the Hindi passages spell them."""
    assert typed not in LEXICON
    assert to_devanagari(typed) == corpus
    assert to_devanagari(typed, HindiLexicon()) == typed  # the hand list alone: as typed


def test_short_or_unknown_words_stay_as_typed():
    lexicon = load_lexicon()
    for word in ("do", "me", "xqzvw", "", "3.5", "naïve"):
        assert lexicon.devanagari(word) is None
    assert to_devanagari("pH 7 ka matlab kya hai 😀") == "pH 7 का मतलब क्या है 😀"


def test_latin_letter_questions_are_read_in_devanagari_with_the_corpus_lexicon():
    basis = read_language("kis desh mein cornflour gehu se bhi banta hai")
    assert basis.lang == "hi"
    assert "गेहूं" in basis.searched and "बनता" in basis.searched
    before = read_language("kis desh mein cornflour gehu se bhi banta hai",
                           lexicon=HindiLexicon())
    assert "gehu" in before.searched


@pytest.mark.parametrize(("devanagari", "latin"), [
    ("गेम", "game"), ("पील्ड", "peeled"), ("कैफीन", "caffeine"), ("डॉक्टर", "doctor")])
def test_replies_in_latin_letters_spell_english_loanwords_as_english(devanagari, latin):
    assert to_latin(devanagari) == latin


def test_hindi_words_in_latin_replies_keep_their_chat_spelling():
    assert to_latin("चाय में कैफीन कितना होता है। नाम") == "chay mein caffeine kitna hota hai. nam"
    assert to_latin("गेम", HindiLexicon()) == "gem"  # without the lexicon: as it sounds


def test_latin_replies_of_real_passages_hold_no_devanagari(sample_passages):
    """ITRANS leaves the candra o of English loanwords ("डॉक्टर", "ऑफिस") in Devanagari: 78 of
    the sample's first 200 Hindi passages have one, and their replies came out "daॉktar"."""
    hindi = [p.text for p in sample_passages if p.lang == "hi"][:200]
    assert sum("ॉ" in text for text in hindi) > 50
    leftovers = [text for text in hindi if _DEVANAGARI.search(to_latin(text))]
    assert leftovers == []


def test_a_leading_filler_goes_and_the_same_word_inside_stays():
    spoken = "अच्छा तो ये कैल वाला चूना मार्केट में किस सेक्शन में मिलेगा"
    assert strip_fillers(spoken, "hi") == "ये कैल वाला चूना मार्केट में किस सेक्शन में मिलेगा"
    assert strip_fillers(spoken, "hi", leading=False).startswith("अच्छा ये")
    assert strip_fillers("सबसे अच्छा फोन कौन सा है", "hi") == "सबसे अच्छा फोन कौन सा है"
    assert strip_fillers("मतलब घर पे मासा बनाने में", "hi") == "घर पे मासा बनाने में"
    assert strip_fillers("अच्छा", "hi") == "अच्छा"  # nothing else: the question as it was


def test_the_lexicon_file_names_its_rebuild_when_damaged(tmp_path):
    from rag.errors import ModelFileError
    from rag.lexicon import load_lexicon as load

    bad = tmp_path / "hindi_lexicon.json"
    bad.write_text(json.dumps({"version": 0}), encoding="utf-8")
    with pytest.raises(ModelFileError, match="build-lexicon"):
        load(bad)
    with pytest.raises(ModelFileError, match="build-lexicon"):
        load(tmp_path / "missing.json")


def _training(style: str) -> list[dict]:
    rows = [json.loads(line) for path in sorted(TRAINING.glob("hi_*.jsonl"))
            for line in path.open(encoding="utf-8") if line.strip()]
    return [r for r in rows if r["style"] == style and r["kind"] == "answerable"]


def _cleared_and_found(pipeline, rows: list[dict], **reading) -> tuple[int, int]:
    """(questions whose dense top clears the Hindi floor, questions with a passage holding the
    answer span among the top 5 hits), each read by ``read_language(**reading)``."""
    cleared = found = 0
    for row in rows:
        basis = read_language(row["question"], **reading)
        text = basis.searched or row["question"]
        hits, top = pipeline.search(text, pipeline.encode_query(text), basis.lang, False)
        cleared += top is not None and top >= pipeline.settings.floor(basis.lang)
        found += any(row["answer"] in pipeline.in_language(h, "hi").text for h in hits[:5])
    return cleared, found


def test_the_lexicon_lifts_latin_letter_hindi_over_the_floor(pipeline):
    """The 210 answerable Latin-letter Hindi training questions: the floor let 75.7 % through
    when the hand list alone read them, 89.0 % with the corpus lexicon (docs/benchmarks.md)."""
    rows = _training("latin")
    assert len(rows) == 210
    with_lexicon, found = _cleared_and_found(pipeline, rows)
    hand_only, found_before = _cleared_and_found(pipeline, rows, lexicon=HindiLexicon())
    assert with_lexicon - hand_only >= 20, (with_lexicon, hand_only)
    assert found >= found_before


def test_leading_fillers_off_spoken_hindi_find_more_passages(pipeline):
    """Spoken Hindi training questions that open with "अच्छा" or "मतलब": with the opening
    word gone, the floor lets more through and more find their passage in the top 5."""
    rows = [r for r in _training("spoken") if r["question"].split()[0] in ("अच्छा", "मतलब")]
    assert len(rows) > 100
    cleared, found = _cleared_and_found(pipeline, rows)
    cleared_before, found_before = _cleared_and_found(pipeline, rows, leading=False)
    assert cleared > cleared_before and found > found_before, (
        cleared, cleared_before, found, found_before)
