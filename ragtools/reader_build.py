"""Build the reader (:mod:`rag.reader`) from e5-small's weights and the committed trained part,
and export it to ONNX: ``python -m ragtools build-reader`` (torch at build time only).

The torch modules here are shared with ``scripts/train_reader.py``: :func:`load_base` (e5-small
from the offline sentence-transformers folder, cut to ``N_LAYERS``), :class:`ReaderModel` (the
whole cross-encoder, for export) and :func:`trained_state` / :func:`load_trained` (the part that
is trained and committed: the last layer, the head and the null logit).
"""

from __future__ import annotations

import fcntl
import json
import logging
import shutil
from pathlib import Path

import numpy as np

from rag.reader import (
    MAX_TOKENS,
    N_LAYERS,
    READER_FORMAT,
    WEIGHTS_PATH,
    default_reader_dir,
    weights_sha256,
)
from ragtools.offline_e5 import ensure_offline_model

log = logging.getLogger(__name__)


def load_base(model_dir: Path | None = None):
    """(tokenizer, XLMRobertaModel cut to ``N_LAYERS`` layers, eval mode) from the offline
    folder (built first if missing)."""
    from transformers import AutoModel, AutoTokenizer

    folder = Path(model_dir) if model_dir else ensure_offline_model()
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    base = AutoModel.from_pretrained(str(folder)).eval()
    base.encoder.layer = base.encoder.layer[:N_LAYERS]
    base.config.num_hidden_layers = N_LAYERS
    return tokenizer, base


def _torch_modules():
    import torch
    from torch import nn

    class ReaderModel(nn.Module):
        """input_ids, attention_mask int64 (batch, tokens) -> logits float32 (batch,): the head
        over the mean of the last layer's token vectors (padding excluded)."""

        def __init__(self, base) -> None:
            super().__init__()
            self.base = base
            self.head = nn.Linear(base.config.hidden_size, 1)

        def forward(self, input_ids, attention_mask):
            hidden = self.base(input_ids=input_ids, attention_mask=attention_mask)
            mask = attention_mask.unsqueeze(-1).to(hidden.last_hidden_state.dtype)
            pooled = (hidden.last_hidden_state * mask).sum(1) / mask.sum(1)
            return self.head(pooled).squeeze(-1)

    return torch, ReaderModel


def trained_state(layer, head, null: float) -> dict[str, np.ndarray]:
    """The committed part as float16 arrays: the last layer's parameters (``layer.<name>``),
    the head's (``head.weight``, ``head.bias``) and ``null``."""
    out = {f"layer.{k}": v.detach().cpu().numpy().astype(np.float16)
           for k, v in layer.state_dict().items()}
    out.update({f"head.{k}": v.detach().cpu().numpy().astype(np.float16)
                for k, v in head.state_dict().items()})
    out["null"] = np.array([null], dtype=np.float32)
    return out


def load_trained(model, path: Path = WEIGHTS_PATH) -> float:
    """Load the committed part into ``model`` (a :class:`ReaderModel`); returns ``null``."""
    torch, _ = _torch_modules()
    with np.load(path) as data:
        layer = {k.removeprefix("layer."): torch.from_numpy(data[k].astype(np.float32))
                 for k in data.files if k.startswith("layer.")}
        head = {k.removeprefix("head."): torch.from_numpy(data[k].astype(np.float32))
                for k in data.files if k.startswith("head.")}
        null = float(data["null"][0])
    model.base.encoder.layer[-1].load_state_dict(layer)
    model.head.load_state_dict(head)
    return null


def build_reader(out_dir: Path | None = None, model_dir: Path | None = None) -> Path:
    """Assemble the reader and export it to ``out_dir`` (default
    :func:`rag.reader.default_reader_dir`): ``model.onnx`` (fp32), ``tokenizer.json`` and
    ``reader.json`` (format, weights hash, null logit). About 20 s."""
    torch, reader_model = _torch_modules()
    out = Path(out_dir) if out_dir else default_reader_dir()
    tokenizer, base = load_base(model_dir)
    model = reader_model(base).eval()
    null = load_trained(model)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    example = tokenizer(["query: a question"], ["passage: a candidate sentence"],
                        return_tensors="pt", truncation="only_second", max_length=MAX_TOKENS)
    with torch.no_grad():
        torch.onnx.export(
            model, (example["input_ids"], example["attention_mask"]), str(tmp / "model.onnx"),
            input_names=["input_ids", "attention_mask"], output_names=["logits"],
            dynamic_axes={"input_ids": {0: "batch", 1: "tokens"},
                          "attention_mask": {0: "batch", 1: "tokens"}, "logits": {0: "batch"}},
            opset_version=17, dynamo=False)
    tokenizer.backend_tokenizer.save(str(tmp / "tokenizer.json"))
    (tmp / "reader.json").write_text(json.dumps({
        "format": READER_FORMAT, "weights_sha256": weights_sha256(), "null": null,
        "model": "model.onnx", "n_layers": N_LAYERS}, indent=1) + "\n", encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def ensure_reader(out_dir: Path | None = None) -> Path:
    """The reader folder, built first when missing or stale (serialised on a lock file)."""
    from rag.errors import ModelFileError
    from rag.reader import Reader

    out = Path(out_dir) if out_dir else default_reader_dir()
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_name(f".{out.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            Reader(out)
        except ModelFileError:
            log.info("building the reader dir=%s", out)
            build_reader(out)
    return out
