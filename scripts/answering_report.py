"""What ``scripts/fit_answering.py`` reports of its out-of-fold decisions: per language, per
language and style, the reader's pick and signals, and the plots (``docs/img``).

Every function reads the fit's ``items`` (its ``Item`` rows: ``text``, ``lang``, ``kind``,
``answer``, ``style``, ``candidates``, ``prepared``) and ``decided`` (index -> the out-of-fold
decision: ``selection``, ``answered``, ``hedged``, ``p``, ``label``, and for questions a reader
read, ``read``, ``reader_scores``, ``reader_x``, ``moved``); a question the floor refused has
no entry. A text holds the fact when it contains the answer span (``eval/README.md``).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from rag.selection import Selection
from rag.settings import RagSettings
from rag.types import LANGUAGES


def _decision(d: dict | None, gate: bool = True) -> tuple[Selection | None, bool, bool]:
    """(the selection or None where the floor refused, answered confidently, hedged) of one
    question's entry in ``decided``; without the gate every selection counts as answered."""
    sel = d["selection"] if d else None
    answered = sel is not None and (d["answered"] if gate else True)
    hedged = gate and sel is not None and d.get("hedged", False)
    return sel, answered, hedged


def answerable_outcome(it, d: dict | None, gate: bool = True) -> dict[str, bool]:
    """One answerable question's outcome: confident correct / wrong, hedged holding the fact /
    not, the fact delivered (either kind holds it), refused; the text holds the fact when it
    contains the answer span (``eval/README.md``)."""
    sel, answered, hedged = _decision(d, gate)
    holds = sel is not None and it.answer in sel.text
    return {"correct": answered and holds, "wrong": answered and not holds,
            "hedged_right": hedged and holds, "hedged_wrong": hedged and not holds,
            "delivered": (answered or hedged) and holds, "refused": not (answered or hedged)}


def report(items: list, decided: dict[int, dict], gate: bool = True) -> dict:
    """Per language: natural answerable correct / wrong / refused (confident answers), hedged
    right / wrong, the fact delivered (a confident or hedged answer holds it), near-misses
    answered confidently / hedged, and the dataset categories answered (either kind); with n
    and the median answer length."""
    table: dict[str, dict] = defaultdict(lambda: defaultdict(list))
    chars: dict[str, list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        d = decided.get(i)
        sel, answered, hedged = _decision(d, gate)
        row = table[it.lang]
        if it.kind == "answerable":
            for key, value in answerable_outcome(it, d, gate).items():
                row[f"answerable_{key}"].append(value)
            # the candidates are the top hits read in the question's language
            row["answerable_in_top5"].append(any(it.answer in c.source.text
                                                 for c in it.candidates))
        elif it.kind == "near_miss":
            row["near_miss_answered"].append(answered)
            row["near_miss_hedged"].append(hedged)
        elif it.kind == "followup":
            row["followup_delivered"].append(answerable_outcome(it, d, gate)["delivered"])
        elif it.kind == "followup_no_answer":
            row["followup_no_answer_answered"].append(answered)
        else:
            row[f"{it.kind}_answered"].append(answered or hedged)
        if answered or hedged:
            chars[it.lang].append(len(sel.text))
    out = {}
    for lang in LANGUAGES:
        if lang not in table:
            continue
        out[lang] = {k: {"n": len(v), "share": sum(v) / len(v)} for k, v in table[lang].items()}
        out[lang]["median_answer_chars"] = statistics.median(chars[lang]) if chars[lang] else None
    return out


ROWS = (
    ("answerable_correct", "natural answerable: confident, correct"),
    ("answerable_wrong", "natural answerable: confident, wrong"),
    ("answerable_hedged_right", "natural answerable: hedged, holds the fact"),
    ("answerable_hedged_wrong", "natural answerable: hedged, misses it"),
    ("answerable_delivered", "natural answerable: fact delivered (either)"),
    ("answerable_refused", "natural answerable: refused"),
    ("answerable_in_top5", "natural answerable: span in a top-5 passage"),
    ("near_miss_answered", "natural near-miss: answered confidently"),
    ("near_miss_hedged", "natural near-miss: hedged"),
    ("off_corpus_answered", "off-corpus: answered (either kind)"),
    ("near_corpus_answered", "near-corpus, unanswerable: answered (either)"),
    ("followup_delivered", "follow-up pairs: fact delivered (either)"),
    ("followup_no_answer_answered", "follow-ups with no answer: confident"),
    ("dataset_answerable_answered", "dataset answerable: answered (either)"),
    ("no_answer_present_answered", "dataset No Answer Present: answered"),
    ("not_in_corpus_answered", "dataset not-in-corpus: answered (either)"),
)


STYLES = ("typed", "spoken", "code_mixed", "latin")
STYLE_ROWS = (
    ("floor_refused", "refused by the floor"),
    ("span_read", "span in a candidate the reader reads"),
    ("no_gate", "the pick holds it (no gate)"),
    ("delivered", "fact delivered (confident or hedged)"),
    ("confident", "confident, correct"),
    ("wrong", "confident, wrong"),
)
"""Per style, the shares of natural answerable questions, from the widest to the narrowest: what
the floor lets through, what a perfect picker over the candidates read could give, what the pick
gives when everything is answered, what the gate lets out."""


def style_report(items: list, decided: dict[int, dict]) -> dict[str, dict[str, dict]]:
    """Out of fold, per language and style (:data:`STYLES`), over natural answerable questions:
    ``{lang: {style: {"n": int, "floor_refused": share, ...}}}`` with the shares of
    :data:`STYLE_ROWS` (0-1). The candidates read are the reader's top ``reader_k`` (all
    candidates where nothing was read)."""
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for lang in LANGUAGES:
        for style in STYLES:
            rows = [(it, decided.get(i)) for i, it in enumerate(items) if it.lang == lang
                    and it.style == style and it.kind == "answerable"]
            if not rows:
                continue
            counts = dict.fromkeys((key for key, _ in STYLE_ROWS), 0)
            for it, d in rows:
                gated, floors = answerable_outcome(it, d), answerable_outcome(it, d, gate=False)
                counts["floor_refused"] += floors["refused"]
                counts["no_gate"] += floors["correct"]
                counts["delivered"] += gated["delivered"]
                counts["confident"] += gated["correct"]
                counts["wrong"] += gated["wrong"]
                if d and d["selection"] is not None:
                    read = d["read"][0] if d.get("read") else d["selection"].ranked
                    counts["span_read"] += any(it.answer in c.text for c in read)
            out[lang][style] = {"n": len(rows)} | {k: v / len(rows) for k, v in counts.items()}
    return dict(out)


def print_style_report(rep: dict[str, dict[str, dict]]) -> None:
    print("\nnatural answerable questions by style, out of fold (% of n)")
    cols = [(lang, style) for lang in rep for style in rep[lang]]
    print(f"{'':<40}" + "".join(f"{lang + ' ' + style[:6]:>12}" for lang, style in cols))
    print(f"{'n':<40}" + "".join(f"{rep[lang][style]['n']:>12}" for lang, style in cols))
    for key, label in STYLE_ROWS:
        print(f"{label:<40}" + "".join(f"{100 * rep[lang][style][key]:>11.1f}%"
                                        for lang, style in cols))


TARGETS_BY_ISSUE = {
    "en": {"confident": (0.65, "#31"), "delivered": (0.80, "#31")},
    "hi": {"confident": (0.55, "#32"), "delivered": (0.75, "#32")},
    "gu": {"confident": (0.50, "#32")},
    "te": {"confident": (0.50, "#32")},
}
"""The acceptance figures of issues 31 and 32 on the test set (all styles together), drawn beside
the out-of-fold shares; Hindi in Latin letters has its own (confident 0.40, issue 32)."""


def plot_styles(rep: dict[str, dict[str, dict]], out: Path) -> None:
    """``out`` (PNG): per language and style, the :data:`STYLE_ROWS` shares after the floor as
    bars from the widest to the narrowest, with the issues' targets as ticks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k, _ in STYLE_ROWS if k not in ("floor_refused", "wrong")]
    labels = dict(STYLE_ROWS)
    fig, axes = plt.subplots(1, len(rep), figsize=(3.2 * len(rep), 4.2), sharey=True)
    for ax, lang in zip(np.atleast_1d(axes), rep, strict=True):
        styles = list(rep[lang])
        width = 0.8 / len(keys)
        for j, key in enumerate(keys):
            ax.bar(np.arange(len(styles)) + (j - (len(keys) - 1) / 2) * width,
                   [100 * rep[lang][s][key] for s in styles], width, label=labels[key])
        for key, (target, issue) in TARGETS_BY_ISSUE.get(lang, {}).items():
            ax.axhline(100 * target, color="black" if key == "confident" else "grey",
                       linestyle="--" if key == "confident" else ":", linewidth=0.9)
            ax.annotate(f"{issue} {key} {100 * target:.0f}", (len(styles) - 0.5, 100 * target),
                        fontsize=6, ha="right", va="bottom")
        ticks = [f"{s}\nn={rep[lang][s]['n']}, floor\n"
                 f"refuses {100 * rep[lang][s]['floor_refused']:.0f} %" for s in styles]
        ax.set_xticks(range(len(styles)), ticks, fontsize=7)
        ax.set_xlim(-0.5, len(styles) - 0.5)
        ax.set_title(lang)
        ax.set_ylim(0, 100)
    np.atleast_1d(axes)[0].set_ylabel("% of natural answerable questions (out of fold)")
    handles, names = np.atleast_1d(axes)[0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=7, loc="lower center", ncol=len(keys))
    fig.suptitle("Where the answer is lost: floor, candidates read, pick, gate", fontsize=9)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(f"written {out}")


def print_report(title: str, rep: dict) -> None:
    print(f"\n{title}")
    print(f"{'':<46}" + "".join(f"{lang:>14}" for lang in LANGUAGES))
    for key, label in ROWS:
        cells = []
        for lang in LANGUAGES:
            r = rep.get(lang, {}).get(key)
            cells.append(f"{'-':>14}" if not r or not r["n"] else
                         f"{100 * r['share']:>7.1f}% ({r['n']:>3})")
        print(f"{label:<46}" + "".join(cells))
    med = "".join(f"{str(rep.get(lang, {}).get('median_answer_chars')):>14}" for lang in LANGUAGES)
    print(f"{'median answer length, chars':<46}{med}")


def plot(items: list, decided: dict[int, dict], settings: RagSettings, out_dir: Path) -> None:
    """Two PNGs in ``out_dir``: the top-1 cosine of each kind of question with the language's
    floor (en, hi), and the gate's calibration (out-of-fold probability vs share of right
    answers among the natural answerable questions and near-misses it would answer)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    kinds = (("answerable", "natural answerable"), ("near_miss", "natural near-miss"),
             ("off_corpus", "off-corpus"), ("not_in_corpus", "dataset not in corpus"))
    for ax, lang in zip(axes, ("en", "hi"), strict=True):
        for kind, label in kinds:
            scores = [it.prepared.hits[0].score if it.prepared else np.nan for it in items
                      if it.lang == lang and it.kind == kind]
            scores = [x for x in scores if not np.isnan(x)]
            if scores:
                ax.hist(scores, bins=np.linspace(0.78, 0.95, 35), alpha=0.5, density=True,
                        label=f"{label} (n={len(scores)} over the floor)")
        ax.axvline(settings.floor(lang), color="black", linestyle="--", label="floor")
        ax.set_title(f"{lang}: top-1 cosine of questions that cleared the floor")
        ax.set_xlabel("cosine")
    axes[0].set_ylabel("density")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "natural_scores.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 4))
    rows = [(d["p"], d["label"]) for d in decided.values() if "p" in d and d["label"] is not None]
    p = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    edges = np.linspace(0, 1, 11)
    centres, shares, counts = [], [], []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        mask = (p >= lo) & (p < hi)
        if mask.sum() >= 5:
            centres.append(p[mask].mean())
            shares.append(y[mask].mean())
            counts.append(int(mask.sum()))
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":")
    ax.plot(centres, shares, marker="o")
    for c, s_, n in zip(centres, shares, counts, strict=True):
        ax.annotate(str(n), (c, s_), fontsize=7, xytext=(3, -9), textcoords="offset points")
    ax.set_xlabel("gate probability (out of fold)")
    ax.set_ylabel("share that should be answered")
    ax.set_title("Answerability gate calibration")
    fig.tight_layout()
    fig.savefig(out_dir / "gate_calibration.png", dpi=110)
    plt.close(fig)
    print(f"written {out_dir / 'natural_scores.png'} and {out_dir / 'gate_calibration.png'}")


def reader_report(items: list, decided: dict[int, dict], lang: str) -> None:
    """``lang``, out of fold: how often the reader's top candidate holds the span beside the
    selector's pick (of the questions whose read candidates hold it), and how well the reader's
    signals tell a right answer from a wrong one or a near-miss (ROC AUC)."""
    rows = [(it, decided[i]) for i, it in enumerate(items) if i in decided and it.lang == lang
            and "reader_scores" in decided[i] and it.kind in ("answerable", "near_miss")]
    hold = [(it, d) for it, d in rows if it.kind == "answerable"
            and any(it.answer in c.text for c in d["read"][0])]
    if not hold:
        return
    sel_top = np.mean([it.answer in d["read"][0][0].text for it, d in hold])
    read_top = np.mean([it.answer in d["read"][0][int(np.argmax(d["read"][1]))].text
                        for it, d in hold])
    both_top = np.mean([it.answer in d["selection"].best.text for it, d in hold])
    moved = np.mean([d["moved"] > 0 for _, d in rows])
    print(f"  {lang}: of {len(hold)} answerable questions with the span among the candidates "
          f"read, the top one holds it: selector {100 * sel_top:.1f} %, reader "
          f"{100 * read_top:.1f} %, both (the pick) {100 * both_top:.1f} %; the pick moved off "
          f"the selector's for {100 * moved:.1f} % of {len(rows)} natural questions")
    y = np.array([d["label"] for _, d in rows])
    if len(set(y)) == 2:
        for j, name in enumerate(("reader_pick", "reader_best", "reader_margin",
                                  "reader_agrees")):
            auc = roc_auc_score(y, [d["reader_x"][j] for _, d in rows])
            print(f"    {name:<16} ROC AUC right answer vs wrong/near-miss ({lang} natural): "
                  f"{max(auc, 1 - auc):.3f}")


