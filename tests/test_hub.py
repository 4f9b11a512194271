"""ragtools.hub and scripts/fetch_corpus.py, offline: a hand-written fixture in the dataset's schema
(tests/fixtures/msmarco_xi_rows) stands in for the hub; unreachable hubs are real endpoints
that refuse or never answer."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import unicodedata
from pathlib import Path

import pytest

from rag.corpus import read_passages
from rag.errors import CorpusError
from ragtools.hub import FALLBACK_CORPUS, data_file, fetch_corpus, hub_rows, rows_to_passages

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "msmarco_xi_rows"
STEMS = {"hi": "hinval", "gu": "gujval", "te": "telval"}


def fixture_rows(source: str) -> list[dict]:
    path = FIXTURE / f"{STEMS[source]}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def by_id(passages) -> dict:
    return {p.id: p for p in passages}


# --- rows_to_passages ---------------------------------------------------------------------------

def test_english_and_hindi_passages_come_from_the_hindi_rows_with_ids_and_selection():
    rows = fixture_rows("hi")
    en = by_id(rows_to_passages(rows, "en"))
    hi = by_id(rows_to_passages(rows, "hi"))

    assert sorted(en) == ["en-1001-0", "en-1001-1", "en-1001-2", "en-1002-0", "en-1002-1",
                          "en-1003-0", "en-1003-1", "en-1003-2"]
    assert all(p.lang == "en" for p in en.values())
    assert en["en-1002-1"].text == rows[1]["passages"]["English_passages"][1]
    assert (en["en-1002-1"].query_id, en["en-1002-1"].passage_index) == (1002, 1)
    assert hi["hi-1001-0"].text == rows[0]["passages"]["Translated_passages"][0]
    assert hi["hi-1001-0"].lang == "hi"
    # is_selected is carried over (MS MARCO's 1/0 -> bool); query 1003 has none selected.
    assert {i for i, p in en.items() if p.is_selected} == {"en-1001-0", "en-1002-0"}
    assert {i for i, p in hi.items() if p.is_selected} == {"hi-1001-0", "hi-1002-0"}


def test_passage_text_is_nfc_normalised_and_trimmed():
    en = by_id(rows_to_passages(fixture_rows("hi"), "en"))
    te = by_id(rows_to_passages(fixture_rows("te"), "te"))

    assert en["en-1001-2"].text == "A caf\u00e9 serves tea and coffee made with boiling water."
    assert "\u0c48" in te["te-1001-1"].text and "\u0c56" not in te["te-1001-1"].text
    for p in [*en.values(), *te.values()]:
        assert p.text == unicodedata.normalize("NFC", p.text) == p.text.strip()


def test_whitespace_only_passages_and_repeated_rows_are_skipped():
    rows = fixture_rows("hi")
    assert rows[-1]["query_id"] == rows[0]["query_id"]  # the fixture repeats query 1001
    hi = list(rows_to_passages(rows, "hi"))
    ids = [p.id for p in hi]

    assert "hi-1002-1" not in ids  # its translation is "  \t "
    assert len(ids) == len(set(ids)) == 7


def test_passages_given_as_a_list_of_dicts_are_read_too():
    row = {"query_id": 7, "target_lang": "tel_Telu", "passages": [
        {"English_passages": "One.", "Translated_passages": "ఒకటి.", "is_selected": 1},
        {"English_passages": "Two.", "Translated_passages": "రెండు.", "is_selected": 0},
    ]}
    te = list(rows_to_passages([row], "te"))
    assert [(p.id, p.text, p.is_selected) for p in te] == [
        ("te-7-0", "ఒకటి.", True), ("te-7-1", "రెండు.", False)]


def test_rows_of_another_language_are_refused():
    with pytest.raises(CorpusError, match="guj_Gujr"):
        list(rows_to_passages(fixture_rows("gu"), "hi"))


def test_row_without_query_id_is_refused():
    with pytest.raises(CorpusError, match="query_id"):
        list(rows_to_passages([{"passages": {"English_passages": ["x"]}}], "en"))


def test_unknown_language_is_a_value_error():
    with pytest.raises(ValueError, match="fr"):
        list(rows_to_passages(fixture_rows("hi"), "fr"))


def test_data_file_follows_the_repository_layout():
    assert data_file("hi") == "hf://datasets/ai4bharat/MSMARCO-XI/validation/hinval.parquet"
    assert data_file("gu", revision="abc").endswith("MSMARCO-XI@abc/validation/gujval.parquet")
    assert data_file("te", base="/x") == "/x/validation/telval.parquet"
    with pytest.raises(ValueError):
        data_file("en")


# --- fetch_corpus with an injected loader --------------------------------------------------------

def test_fetch_corpus_writes_a_corpus_that_read_passages_reads_back(tmp_path):
    out = tmp_path / "data" / "corpus.jsonl"
    counts = fetch_corpus(out, load_rows=fixture_rows, progress=False)

    passages = read_passages(out)
    assert counts == {"en": 8, "hi": 7, "gu": 8, "te": 5}
    assert {lang: sum(p.lang == lang for p in passages) for lang in counts} == counts
    ids = by_id(passages)
    assert ids["gu-1003-2"].text == fixture_rows("gu")[1]["passages"]["Translated_passages"][2]
    assert ids["te-1002-0"].is_selected and not ids["en-1003-0"].is_selected
    assert [p.name for p in out.parent.iterdir()] == ["corpus.jsonl"]  # no temp file left


def test_english_is_read_from_the_hindi_file_in_the_same_pass(tmp_path):
    calls: list[str] = []

    def load(source):
        calls.append(source)
        return fixture_rows(source)

    counts = fetch_corpus(tmp_path / "c.jsonl", load_rows=load, progress=False)

    assert calls == ["hi", "gu", "te"]  # one read per file; never asked for an "en" file
    assert counts["en"] == 8 and counts["hi"] == 7


def test_per_language_cap_is_honoured_and_reading_stops_early(tmp_path):
    consumed = {"hi": 0, "gu": 0, "te": 0}

    def load(source):
        for row in fixture_rows(source):
            consumed[source] += 1
            yield row

    counts = fetch_corpus(tmp_path / "c.jsonl", per_language=2, load_rows=load, progress=False)

    assert counts == {"en": 2, "hi": 2, "gu": 2, "te": 2}
    passages = read_passages(tmp_path / "c.jsonl")
    assert sorted(p.id for p in passages if p.lang in ("en", "hi")) == [
        "en-1001-0", "en-1001-1", "hi-1001-0", "hi-1001-1"]
    assert consumed["hi"] == 1  # the cap was met inside the first row: nothing more was read
    assert consumed["te"] == 1


def test_parallel_ids_match_across_languages(tmp_path):
    fetch_corpus(tmp_path / "c.jsonl", load_rows=fixture_rows, progress=False)
    ids = by_id(read_passages(tmp_path / "c.jsonl"))
    english = {(r["query_id"], i): t for r in fixture_rows("hi")
               for i, t in enumerate(r["passages"]["English_passages"])}

    indic = [p for p in ids.values() if p.lang != "en"]
    assert indic
    for p in indic:
        sibling = ids[p.sibling_id("en")]  # every translation has its English original
        original = english[(p.query_id, p.passage_index)]
        assert sibling.text == unicodedata.normalize("NFC", original).strip()
        assert sibling.is_selected == p.is_selected
    # Same query, same position, four scripts: the boiling-point answer.
    assert all("100" in ids[f"{lang}-1001-0"].text for lang in ("en", "hi", "gu", "te"))


def test_align_keeps_indic_rows_to_the_hindi_query_ids(tmp_path):
    aligned = fetch_corpus(tmp_path / "a.jsonl", load_rows=fixture_rows, progress=False)
    free = fetch_corpus(tmp_path / "f.jsonl", load_rows=fixture_rows, align=False, progress=False)

    assert "gu-1004-0" not in by_id(read_passages(tmp_path / "a.jsonl"))  # 1004 is not in hinval
    assert "gu-1004-0" in by_id(read_passages(tmp_path / "f.jsonl"))
    assert (aligned["gu"], free["gu"]) == (8, 9)


def test_failed_fetch_leaves_the_previous_corpus_untouched(tmp_path):
    out = tmp_path / "corpus.jsonl"
    out.write_text("previous\n", encoding="utf-8")

    def load(source):
        yield from fixture_rows(source)
        if source == "gu":
            raise CorpusError("connection dropped")

    with pytest.raises(CorpusError, match="connection dropped"):
        fetch_corpus(out, load_rows=load, progress=False)
    assert out.read_text(encoding="utf-8") == "previous\n"
    assert [p.name for p in tmp_path.iterdir()] == ["corpus.jsonl"]


def test_a_language_without_passages_is_an_error(tmp_path):
    def load(source):
        return [] if source == "te" else fixture_rows(source)

    with pytest.raises(CorpusError, match="te"):
        fetch_corpus(tmp_path / "c.jsonl", load_rows=load, progress=False)
    assert not (tmp_path / "c.jsonl").exists()


def test_bad_arguments_are_value_errors(tmp_path):
    with pytest.raises(ValueError):
        fetch_corpus(tmp_path / "c.jsonl", per_language=0, load_rows=fixture_rows)
    with pytest.raises(ValueError):
        fetch_corpus(tmp_path / "c.jsonl", languages=("en", "ta"), load_rows=fixture_rows)


# --- the real `datasets` loader on local parquet files ------------------------------------------

@pytest.fixture
def parquet_repo(tmp_path) -> Path:
    """The fixture written as parquet in the repository's layout (validation/hinval.parquet...)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    (tmp_path / "repo" / "validation").mkdir(parents=True)
    for source, stem in STEMS.items():
        pq.write_table(pa.Table.from_pylist(fixture_rows(source)),
                       tmp_path / "repo" / "validation" / f"{stem}.parquet")
    return tmp_path / "repo"


@pytest.mark.slow  # imports datasets: ~3 s
def test_hub_rows_streams_parquet_rows_in_the_dataset_schema(parquet_repo):
    pytest.importorskip("datasets")
    rows = list(hub_rows("hi", base=parquet_repo.as_posix()))

    assert [r["query_id"] for r in rows] == [1001, 1002, 1003, 1001]
    assert rows[0]["target_lang"] == "hin_Deva"
    assert rows[0]["passages"]["is_selected"] == [1, 0, 0]
    assert [p.id for p in rows_to_passages(rows, "hi")][:2] == ["hi-1001-0", "hi-1001-1"]


@pytest.mark.slow  # imports datasets: ~3 s
def test_fetch_corpus_through_the_datasets_loader_matches_the_fixture(parquet_repo, tmp_path):
    pytest.importorskip("datasets")
    via_parquet = fetch_corpus(tmp_path / "p.jsonl", progress=False,
                               load_rows=lambda s: hub_rows(s, base=parquet_repo.as_posix()))
    via_rows = fetch_corpus(tmp_path / "r.jsonl", load_rows=fixture_rows, progress=False)

    assert via_parquet == via_rows
    assert (tmp_path / "p.jsonl").read_bytes() == (tmp_path / "r.jsonl").read_bytes()


@pytest.mark.slow  # imports datasets: ~2 s
def test_hub_rows_names_the_fallback_when_the_file_is_missing(tmp_path):
    pytest.importorskip("datasets")
    with pytest.raises(CorpusError, match="msmarco-xi-sample/corpus.jsonl"):
        list(hub_rows("gu", base=tmp_path.as_posix()))


# --- unreachable hub (fresh interpreter: huggingface_hub reads HF_ENDPOINT at import) -----------

PROBE = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from rag.errors import CorpusError
    from ragtools.hub import fetch_corpus, hub_rows
    out = Path(sys.argv[1])
    result = {}
    start = time.monotonic()
    try:
        fetch_corpus(out, timeout=float(sys.argv[2]), progress=False)
        result["fetch"] = "no error"
    except CorpusError as exc:
        result["fetch"] = str(exc)
    result["fetch_s"] = time.monotonic() - start
    start = time.monotonic()
    try:
        next(iter(hub_rows("hi")))
        result["rows"] = "no error"
    except CorpusError as exc:
        result["rows"] = str(exc)
    result["rows_s"] = time.monotonic() - start
    result["written"] = out.exists()
    print(json.dumps(result))
""")


def run_probe(tmp_path, env_overrides: dict[str, str], timeout: float = 5.0) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_ENDPOINT", "HF_TOKEN")}
    env.update(HF_HOME=str(tmp_path / "hf-home"), PYTHONPATH=str(ROOT), **env_overrides)
    proc = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "c.jsonl"), str(timeout)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a child process importing datasets, then waiting on the hub
def test_refused_hub_connection_raises_corpus_error_naming_the_fallback_quickly(tmp_path):
    result = run_probe(tmp_path, {"HF_ENDPOINT": "http://127.0.0.1:9"})

    assert FALLBACK_CORPUS in result["fetch"] and "ConnectError" in result["fetch"]
    assert FALLBACK_CORPUS in result["rows"]
    assert result["fetch_s"] < 5 and result["rows_s"] < 15
    assert not result["written"]


@pytest.fixture
def silent_server():
    """A TCP endpoint that accepts connections and never answers (a stalled network)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(2)
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.slow  # a child process importing datasets, then waiting on the hub
def test_stalled_hub_times_out_with_corpus_error(tmp_path, silent_server):
    result = run_probe(tmp_path, {"HF_ENDPOINT": silent_server, "HF_HUB_ETAG_TIMEOUT": "1",
                                  "HF_HUB_DOWNLOAD_TIMEOUT": "1"}, timeout=1.0)

    assert FALLBACK_CORPUS in result["fetch"] and "within 1 s" in result["fetch"]
    assert result["fetch_s"] < 3
    assert FALLBACK_CORPUS in result["rows"]
    assert not result["written"]


@pytest.mark.slow  # a child process importing datasets, then waiting on the hub
def test_offline_mode_raises_corpus_error_naming_the_fallback(tmp_path):
    result = run_probe(tmp_path, {"HF_HUB_OFFLINE": "1"})

    assert FALLBACK_CORPUS in result["fetch"] and FALLBACK_CORPUS in result["rows"]
    assert result["fetch_s"] < 5


# --- the CLI -------------------------------------------------------------------------------------

def run_cli(tmp_path, *args: str, env_overrides: dict[str, str] | None = None):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_ENDPOINT")}
    env.update(HF_HOME=str(tmp_path / "hf-home"), **(env_overrides or {}))
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch_corpus.py"), *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # runs scripts/fetch_corpus.py
def test_cli_exits_1_with_the_fallback_when_the_hub_is_unreachable(tmp_path):
    proc = run_cli(tmp_path, "--out", "data/corpus.jsonl",
                   env_overrides={"HF_ENDPOINT": "http://127.0.0.1:9"})

    assert proc.returncode == 1
    assert proc.stderr.startswith("error: cannot read ai4bharat/MSMARCO-XI")
    assert FALLBACK_CORPUS in proc.stderr
    assert not (tmp_path / "data" / "corpus.jsonl").exists()


@pytest.mark.slow  # runs scripts/fetch_corpus.py
def test_cli_reads_a_local_copy_and_prints_counts(tmp_path, parquet_repo):
    pytest.importorskip("datasets")
    proc = run_cli(tmp_path, "--out", "data/corpus.jsonl", "--per-language", "6",
                   "--source-dir", str(parquet_repo), "--no-progress")

    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split("\t", 1) for line in proc.stdout.splitlines())
    assert lines["en"] == "6" and lines["gu"] == "6"
    assert lines["te"] == "5  (fewer than 6)"
    assert len(read_passages(tmp_path / "data" / "corpus.jsonl")) == 23


@pytest.mark.slow  # runs scripts/fetch_corpus.py
def test_cli_rejects_a_non_positive_cap(tmp_path):
    proc = run_cli(tmp_path, "--per-language", "0")
    assert proc.returncode == 2 and "--per-language" in proc.stderr
