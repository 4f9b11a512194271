"""Scripts run end to end on the sample index: the acceptance demo (the real ``python -m bot``
child process against the stand-in servers answers a Hindi voice note in Devanagari with a
citation, and /why) and the probe of the answerability gate's gap."""

import os
import re
import subprocess
import sys
from pathlib import Path

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


def test_unanswerable_probe_prints_each_signal_and_a_ceiling_per_language(sample_index_dir):
    env = {**os.environ, "VOICE_RAG_INDEX_DIR": str(sample_index_dir)}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "probe_unanswerable.py")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ceilings = [float(c) for c in re.findall(r"balanced accuracy at most (0\.\d+)", proc.stdout)]
    assert len(ceilings) == 2  # en and hi
    # the documented finding (docs/benchmarks.md): under issue 5's 0.85 target, above chance
    assert all(0.5 < c < 0.85 for c in ceilings), ceilings
    assert len(re.findall(r"AUC 0\.\d+", proc.stdout)) == 2 * 9  # 8 signals + the model
