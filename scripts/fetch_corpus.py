"""Fetch the MSMARCO-XI passage corpus (en/hi/gu/te) from the HuggingFace hub as JSONL.

Run from the project root (needs the ``hub`` extra: ``pip install -e '.[hub]'``):

    python scripts/fetch_corpus.py --out data/corpus.jsonl --per-language 10000

It streams the validation parquet files of ``ai4bharat/MSMARCO-XI`` (English passages come from
the Hindi file, which carries them beside the translations), keeps the first ``--per-language``
passages of each language and writes them atomically (see ``ragtools.hub``). Each language's file is
one ~0.45 GB parquet row group, so expect that much network traffic per file read.

If you downloaded the parquet files yourself (same layout: ``<dir>/validation/hinval.parquet``,
``gujval.parquet``, ``telval.parquet``), read them with ``--source-dir <dir>`` instead.

Without the hub, use the sample shipped beside the project:
``VOICE_RAG_CORPUS_PATH=../shared/data/msmarco-xi-sample/corpus.jsonl``.

Prints the passages written per language; exits 1 with the reason (and the fallback) when the
hub cannot be read, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag.errors import CorpusError  # noqa: E402
from rag.types import LANGUAGES  # noqa: E402
from ragtools.hub import HUB_TIMEOUT_S, fetch_corpus, hub_rows  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("data/corpus.jsonl"),
                        help="JSONL file to write (default: data/corpus.jsonl)")
    parser.add_argument("--per-language", type=int, default=10_000,
                        help="passages per language (default: 10000)")
    parser.add_argument("--languages", nargs="+", default=list(LANGUAGES), choices=LANGUAGES,
                        help="languages to fetch (default: en hi gu te)")
    parser.add_argument("--revision", default=None,
                        help="dataset repository revision (default: main)")
    parser.add_argument("--timeout", type=float, default=HUB_TIMEOUT_S,
                        help=f"seconds to wait for the hub to answer (default: {HUB_TIMEOUT_S})")
    parser.add_argument("--source-dir", type=Path, default=None,
                        help="read already-downloaded parquet files from this folder instead")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = parser.parse_args(argv)
    if args.per_language < 1:
        parser.error("--per-language must be at least 1")

    load_rows = None
    if args.source_dir is not None:
        load_rows = functools.partial(hub_rows, base=args.source_dir.resolve().as_posix())
    try:
        counts = fetch_corpus(
            args.out, per_language=args.per_language, languages=args.languages,
            load_rows=load_rows, revision=args.revision, timeout=args.timeout,
            progress=not args.no_progress,
        )
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for lang, n in counts.items():
        note = "" if n >= args.per_language else f"  (fewer than {args.per_language})"
        print(f"{lang}\t{n}{note}")
    print(f"total\t{sum(counts.values())}\twritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
