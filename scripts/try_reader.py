"""Experiment (issue #9): can a small reader trained here rerank the selector's candidates better?

    python scripts/try_reader.py                      # both variants, 5 folds (~25 min, 2 cores)
    python scripts/try_reader.py --variant residual --epochs 2

The reader is a cross-encoder cut from the bundled multilingual-e5-small (the sentence-transformers
folder that ``python -m ragtools build-model`` writes): its embedding table frozen, its first
``--layers`` transformer layers fine-tuned, a linear head on the mean-pooled output. Input:
``query: <question></s></s>passage: <sentence>`` (at most ``--max-tokens`` tokens). It reads the
``--top`` candidates the shipped selector (rag/selection.py) ranks highest and is trained with a
listwise loss (softmax over one question's candidates; every candidate holding the answer span is
a right one). Two variants:

- ``plain``: the reader's score alone reranks the candidates;
- ``residual``: the reader learns a correction added to the selector's logit (it only has to
  learn what the cheap signals miss).

Everything is out of fold: the folds are ``scripts/fit_answering.py``'s (GroupKFold by query_id
over the natural questions and the dataset queries); each fold's candidates are ranked by a
selector fitted on the other folds and reranked by a reader trained on the other folds' natural
answerable questions, whose own candidates are ranked by selectors fitted without the test fold
either (nested). Reported per language, with n: the top candidate holds the span, and the
shown text (the best sentence and its partner, as the product composes it) holds the span, for
the selector alone and with the reader, before the answerability gate; and the reader's time for
one question's candidates (torch fp32, median and P95).

Results and the decision are in docs/benchmarks.md ("A reader trained here"). Needs torch and
transformers (installed with sentence-transformers).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from evaluate import load_cases  # noqa: E402
from fit_answering import NATURAL, Item, assign_folds, collect, fit_selector  # noqa: E402

from rag.encoders import load_encoder  # noqa: E402
from rag.index import PassageIndex  # noqa: E402
from rag.pipeline import Pipeline  # noqa: E402
from rag.selection import AnswerSelector, Candidate  # noqa: E402
from rag.settings import SHARED_SAMPLE, RagSettings  # noqa: E402
from rag.types import LANGUAGES  # noqa: E402
from ragtools.offline_e5 import ensure_offline_model  # noqa: E402

HIDDEN = 384
"""multilingual-e5-small's hidden size (its config.json)."""


def build_reader(model_dir: Path, layers: int):
    """The truncated e5-small cross-encoder described in the module docstring (torch module)."""
    import torch
    from transformers import AutoModel

    class Reader(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = AutoModel.from_pretrained(str(model_dir))
            self.encoder.encoder.layer = self.encoder.encoder.layer[:layers]
            self.encoder.config.num_hidden_layers = layers
            for p in self.encoder.embeddings.parameters():
                p.requires_grad = False
            self.head = torch.nn.Linear(HIDDEN, 1)

        def forward(self, batch) -> torch.Tensor:
            hidden = self.encoder(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).float()
            return self.head((hidden * mask).sum(1) / mask.sum(1)).squeeze(-1)

    return Reader()


def holds_answer(item: Item, candidate: Candidate) -> bool:
    """The candidate's text contains the question's verbatim answer span."""
    return bool(item.answer) and item.answer in candidate.text


def logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


Ranked = list[tuple[Item, list[Candidate]]]
"""Questions with their candidates, best first by the selector."""


def train_and_score(args, variant: str, tokenizer, model_dir: Path, train: Ranked,
                    test: Ranked) -> tuple[dict[int, np.ndarray], list[float]]:
    """Train one reader on ``train`` (questions with their selector-ranked candidates) and score
    ``test``'s top candidates: ``{id(item): scores}`` (float64, one per candidate read) and the
    seconds each test question took."""
    import torch

    def batch(question: str, cands: list[Candidate]):
        return tokenizer([f"query: {question}"] * len(cands),
                         [f"passage: {c.text}" for c in cands], truncation="only_second",
                         max_length=args.max_tokens, padding=True, return_tensors="pt")

    def scores(model, item: Item, cands: list[Candidate]) -> torch.Tensor:
        out = model(batch(item.text, cands))
        if variant == "residual":
            out = out + torch.tensor([logit(c.probability) for c in cands])
        return out

    model = build_reader(model_dir, args.layers)
    params = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    groups = [(it, cands[: args.top]) for it, cands in train
              if any(holds_answer(it, c) for c in cands[: args.top])]
    steps = args.epochs * len(groups)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / (0.1 * steps)) * max(0.0, 1 - s / steps))
    rng = random.Random(0)
    model.train()
    for epoch in range(args.epochs):
        rng.shuffle(groups)
        total = 0.0
        for item, cands in groups:
            out = scores(model, item, cands)
            right = torch.tensor([holds_answer(item, c) for c in cands])
            loss = torch.logsumexp(out, 0) - torch.logsumexp(out.masked_fill(~right, -1e4), 0)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
            total += loss.item()
        print(f"  epoch {epoch + 1}: listwise loss {total / len(groups):.3f} "
              f"({len(groups)} questions)", flush=True)
    model.eval()
    out: dict[int, np.ndarray] = {}
    seconds: list[float] = []
    with torch.inference_mode():
        for item, cands in test:
            if not cands:
                continue
            start = time.perf_counter()
            out[id(item)] = scores(model, item, cands[: args.top]).double().numpy()
            seconds.append(time.perf_counter() - start)
    return out, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, default=RagSettings.from_env().index_dir)
    parser.add_argument("--variant", choices=("plain", "residual"), nargs="+",
                        default=["plain", "residual"])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--top", type=int, default=8, help="selector candidates the reader reads")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--cache", type=Path, help="pickle of retrieval results (fit_answering)")
    parser.add_argument("--json", type=Path, help="write the report as JSON")
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoTokenizer

    torch.manual_seed(0)
    settings = replace(RagSettings.from_env(), index_dir=args.index, use_gate=False)
    encoder = load_encoder(settings.encoder)
    index = PassageIndex.load(settings.index_dir, encoder_name=encoder.name)
    pipeline = Pipeline(settings, encoder, index, gate=None, selector=AnswerSelector.neutral())
    natural = [json.loads(line) for line in NATURAL.open(encoding="utf-8") if line.strip()]
    items = collect(pipeline, natural, load_cases(SHARED_SAMPLE.parent, 150), args.cache)
    assign_folds(items, args.folds)
    model_dir = ensure_offline_model()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))

    answerable = [it for it in items if it.kind == "answerable" and it.candidates]
    # A test question (fold f) is ranked by a selector fitted without fold f; a training question
    # of fold g, for test fold f, by one fitted without folds f and g (nested), so neither the
    # reader's inputs nor its training ranks have seen the test fold's answers.
    selectors = {f: fit_selector([it for it in items if it.fold != f])
                 for f in range(args.folds)}
    without_pair = {(f, g): fit_selector([it for it in items if it.fold not in (f, g)])
                    for f in range(args.folds) for g in range(f + 1, args.folds)}

    def ranked(item: Item, test_fold: int) -> list[Candidate]:
        if item.fold == test_fold:
            return selectors[test_fold].score(item.candidates)
        pair = (min(item.fold, test_fold), max(item.fold, test_fold))
        return without_pair[pair].score(item.candidates)

    report: dict = {}
    for variant in ["selector", *args.variant]:
        rows: dict[str, dict[str, list[bool]]] = {}
        seconds: list[float] = []
        for f in range(args.folds):
            test = [(it, ranked(it, f)) for it in answerable if it.fold == f]
            if variant == "selector":
                reranked = {id(it): c for it, c in test}
            else:
                print(f"{variant}: fold {f + 1}/{args.folds}", flush=True)
                train = [(it, ranked(it, f)) for it in answerable if it.fold != f]
                scores, took = train_and_score(args, variant, tokenizer, model_dir, train, test)
                seconds += took
                reranked = {}
                for it, cands in test:
                    order = np.argsort(-scores[id(it)], kind="stable")
                    reranked[id(it)] = [cands[j] for j in order] + cands[args.top:]
            for it, _ in test:
                cands = reranked[id(it)]
                shown = selectors[f].compose(it.text, cands)
                row = rows.setdefault(it.lang, {"top": [], "shown": []})
                row["top"].append(holds_answer(it, cands[0]))
                row["shown"].append(shown is not None and it.answer in shown.text)
        report[variant] = {
            lang: {k: {"n": len(v), "share": sum(v) / len(v)} for k, v in rows[lang].items()}
            for lang in LANGUAGES if lang in rows
        }
        if seconds:
            report[variant]["seconds"] = {"median": statistics.median(seconds),
                                          "p95": float(np.percentile(seconds, 95))}

    print("\nout of fold, before the gate: top candidate holds the span / shown text holds it")
    print(f"{'':<10}" + "".join(f"{lang:>22}" for lang in LANGUAGES) + "   reader ms P50 / P95")
    for variant, rep in report.items():
        cells = "".join(
            f"{100 * rep[lang]['top']['share']:>7.1f} / {100 * rep[lang]['shown']['share']:5.1f}"
            f" ({rep[lang]['top']['n']:>3})" if lang in rep else f"{'-':>22}"
            for lang in LANGUAGES)
        ms = rep.get("seconds")
        timing = f"   {1000 * ms['median']:.0f} / {1000 * ms['p95']:.0f}" if ms else ""
        print(f"{variant:<10}{cells}{timing}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
