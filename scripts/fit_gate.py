"""Fit the answerability gate on the shared sample, cross-validated by query_id.

    python scripts/fit_gate.py                       # writes rag/gate_model.json
    python scripts/fit_gate.py --dry-run             # report only

Data: every labelled case of the shared sample (scripts/evaluate.py ``load_cases``) that clears
the floor of its language — the gate only ever sees those. Positives: answerable queries (gold
passage in the corpus). Negatives: "No Answer Present", off-corpus, and a random sample of
dataset queries whose passages are not in the sample.

Model: scikit-learn logistic regression on standardised features (rag/gate.py ``FEATURES``),
one per language where there are at least ``--min-per-language`` cases of each class, else a
pooled model. Out-of-fold probabilities come from GroupKFold by query_id (translations of one
query share a query_id, so neither a query nor its translation leaks between folds). The
threshold is the highest one that keeps at least ``--target-recall`` of answerable cases on the
out-of-fold predictions; the final model is refitted on all cases with that threshold.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from evaluate import load_cases, print_refusals, refusal_metrics  # noqa: E402

from rag.gate import FEATURES, MODEL_PATH  # noqa: E402
from rag.pipeline import Pipeline, Prepared  # noqa: E402
from rag.settings import SHARED_SAMPLE, RagSettings  # noqa: E402
from rag.types import LANGUAGES, Trace  # noqa: E402


def collect(pipeline: Pipeline, cases) -> tuple[list[dict], list]:
    """Features of every case that clears the floor (with label, language, group, category),
    and the cases the floor refused."""
    rows, refused = [], []
    for i, case in enumerate(cases):
        prepared = pipeline.prepare(case.text, None, None, Trace())
        if not isinstance(prepared, Prepared):
            refused.append(case)
            continue
        rows.append(
            {
                "x": pipeline.gate_features(prepared).vector(),
                "y": int(case.category == "answerable"),
                "lang": case.lang,
                "category": case.category,
                "group": case.query_id if case.query_id is not None else -1 - i,
            }
        )
    return rows, refused


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[StandardScaler, LogisticRegression]:
    scaler = StandardScaler().fit(x)
    model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000)
    return scaler, model.fit(scaler.transform(x), y)


def out_of_fold(x: np.ndarray, y: np.ndarray, groups: np.ndarray, n_splits: int) -> np.ndarray:
    oof = np.zeros(len(y))
    for train, test in GroupKFold(n_splits=n_splits).split(x, y, groups):
        scaler, model = _fit(x[train], y[train])
        oof[test] = model.predict_proba(scaler.transform(x[test]))[:, 1]
    return oof


def pick_threshold(p: np.ndarray, y: np.ndarray, target_recall: float) -> float:
    """Highest threshold keeping ``target_recall`` of positives (out-of-fold)."""
    pos = np.sort(p[y == 1])
    k = int(np.floor((1 - target_recall) * len(pos)))
    return float(pos[k]) if len(pos) else 0.5


def print_signal_table(x: np.ndarray, y: np.ndarray, groups: np.ndarray, n_splits: int) -> None:
    """What each signal earns: its own ROC AUC (direction-free), and the out-of-fold AUC of the
    pooled model without it, next to the full model's."""
    full = roc_auc_score(y, out_of_fold(x, y, groups, n_splits))
    print(f"pooled model, out-of-fold ROC AUC {full:.3f} (cases clearing the floor, n={len(y)})")
    print(f"{'signal':<20}{'alone AUC':>10}{'AUC without it':>16}")
    for j, name in enumerate(FEATURES):
        alone = roc_auc_score(y, x[:, j])
        rest = np.delete(x, j, axis=1)
        without = roc_auc_score(y, out_of_fold(rest, y, groups, n_splits))
        print(f"{name:<20}{max(alone, 1 - alone):>10.3f}{without:>16.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, default=RagSettings.from_env().index_dir)
    parser.add_argument("--data", type=Path, default=SHARED_SAMPLE.parent)
    parser.add_argument("--not-in-corpus", type=int, default=300)
    parser.add_argument("--target-recall", type=float, default=0.92)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--min-per-language", type=int, default=40)
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)

    settings = replace(RagSettings.from_env(), index_dir=args.index, use_gate=False)
    pipeline = Pipeline.from_settings(settings)
    rows, refused = collect(pipeline, load_cases(args.data, args.not_in_corpus))
    x = np.stack([r["x"] for r in rows])
    y = np.array([r["y"] for r in rows])
    langs = np.array([r["lang"] for r in rows])
    groups = np.array([r["group"] for r in rows])

    scopes = ["all"] + [
        lang
        for lang in LANGUAGES
        if min(((langs == lang) & (y == 1)).sum(), ((langs == lang) & (y == 0)).sum())
        >= args.min_per_language
    ]
    models, oofs = {}, {}
    for scope in scopes:
        mask = np.ones(len(y), bool) if scope == "all" else langs == scope
        oof = out_of_fold(x[mask], y[mask], groups[mask], args.folds)
        threshold = pick_threshold(oof, y[mask], args.target_recall)
        scaler, model = _fit(x[mask], y[mask])
        models[scope] = {
            "mean": scaler.mean_.tolist(),
            "scale": scaler.scale_.tolist(),
            "coef": model.coef_[0].tolist(),
            "intercept": float(model.intercept_[0]),
            "threshold": threshold,
            "n": int(mask.sum()),
            "n_answerable": int(y[mask].sum()),
        }
        oofs[scope] = (mask, oof)
    # Out-of-fold decision per case: its language's model where fitted, else the pooled one.
    decided = np.zeros(len(y), bool)
    for lang in LANGUAGES:
        scope = lang if lang in models else "all"
        scope_mask, oof = oofs[scope]
        lang_mask = langs == lang
        decided[lang_mask] = (oof >= models[scope]["threshold"])[lang_mask[scope_mask]]

    floors: dict = defaultdict(lambda: defaultdict(list))
    gated: dict = defaultdict(lambda: defaultdict(list))
    for case in refused:
        floors[case.lang][case.category].append(False)
        gated[case.lang][case.category].append(False)
    for row, keep in zip(rows, decided, strict=True):
        floors[row["lang"]][row["category"]].append(True)
        gated[row["lang"]][row["category"]].append(bool(keep))
    print_signal_table(x, y, groups, args.folds)
    coef_table = {
        s: dict(zip(FEATURES, (round(c, 3) for c in models[s]["coef"]), strict=False))
        for s in models
    }
    print("standardised coefficients:", json.dumps(coef_table, indent=1))
    print("\nfloors alone (all cases):")
    print_refusals(refusal_metrics(floors))
    print("\nfloors + gate (out-of-fold, GroupKFold by query_id):")
    print_refusals(refusal_metrics(gated))
    if not args.dry_run:
        args.out.write_text(
            json.dumps(
                {
                    "features": list(FEATURES),
                    "models": models,
                    "fitted_on": f"{args.data} ({len(rows)} cases clearing the floor, "
                    f"encoder {pipeline.encoder.name})",
                    "cv": f"GroupKFold({args.folds}) by query_id, "
                    f"target recall {args.target_recall}",
                },
                indent=1,
            )
            + "\n",
            encoding="utf-8",
        )
        print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
