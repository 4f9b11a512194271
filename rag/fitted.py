"""Reading the fitted model files that ``scripts/fit_answering.py`` writes (the answer selector
and the answerability gate): JSON objects whose ``features`` list must equal the code's."""

from __future__ import annotations

import json
from pathlib import Path

from rag.errors import ModelFileError

REFIT = "python3 scripts/fit_answering.py"


def read_model_file(path: Path, features: tuple[str, ...], keys: tuple[str, ...]) -> dict:
    """The parsed model file at ``path``, checked to hold ``keys`` and ``features``.

    Raises:
        ModelFileError: the file is missing, not JSON, lacks a key, or lists other features;
            the message names the file and the refit command.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"cannot read the model file {path} ({exc}): restore it from the "
                             f"repository or rerun {REFIT}") from None
    missing = [k for k in ("features", *keys) if not isinstance(data, dict) or k not in data]
    if missing:
        raise ModelFileError(f"model file {path} lacks {', '.join(missing)}: rerun {REFIT}")
    if tuple(data["features"]) != features:
        raise ModelFileError(f"model file {path} was fitted for features {data['features']}, "
                             f"the code computes {list(features)}: rerun {REFIT}")
    return data


def check_fitted_encoder(path: Path, variant: str) -> None:
    """Stop when the model file at ``path`` was fitted on another encoder's scores than
    ``variant`` (``Encoder.variant``, e.g. ``onnx-int8``): the selector's and gate's signals are
    cosines and their thresholds sit where that encoder puts them.

    Raises:
        ModelFileError: one line naming the file, both encoders and the two ways out.
    """
    try:
        fitted = json.loads(Path(path).read_text(encoding="utf-8")).get("encoder_variant")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
        raise ModelFileError(f"cannot read the model file {path} ({exc}): restore it from the "
                             f"repository or rerun {REFIT}") from None
    if fitted != variant:
        raise ModelFileError(
            f"{path} was fitted on {fitted or 'an unrecorded'} encoder's scores, not on the "
            f"configured {variant}'s: set VOICE_RAG_ENCODER={fitted or 'onnx-int8'} (and build "
            f"its index), or fit {variant}'s own with `VOICE_RAG_ENCODER={variant} python3 -m "
            f"ragtools build-index` then `VOICE_RAG_ENCODER={variant} {REFIT}` (overwrites it)")
