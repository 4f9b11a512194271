"""Domain errors of the RAG core. Front ends (CLI, bot) translate these into user wording."""


class RagError(Exception):
    """Base class; ``str(err)`` is a message fit to show an operator, with the fix."""


class EncoderMismatchError(RagError):
    """An index was built with one encoder and loaded with another."""


class IndexNotFoundError(RagError):
    """No index folder (or an incomplete one) at the configured path."""


class IndexCorruptError(IndexNotFoundError):
    """An index file is empty, truncated, unreadable, or disagrees with ``meta.json`` (dimension,
    metric, counts); ``str(err)`` names the file and the rebuild command."""


class EncoderUnavailableError(RagError):
    """The requested encoder cannot run here (missing package, no AVX2, no weights)."""


class CorpusError(RagError):
    """The corpus file is missing or malformed."""


class ServiceError(RagError):
    """A remote service (speech-to-text, LLM) failed after retries.

    ``reason`` is a short machine-readable code: ``timeout``, ``rate_limited``, ``server_error``,
    ``bad_request``, ``unauthorized``, ``malformed``, ``network``.
    """

    def __init__(self, service: str, reason: str, detail: str = "") -> None:
        self.service, self.reason, self.detail = service, reason, detail
        super().__init__(f"{service}: {reason}" + (f" ({detail})" if detail else ""))


class ModelFileError(RagError):
    """A fitted model file (``rag/gate_model.json``, ``rag/selector_model.json``) is missing,
    unreadable, or fitted for other features than the code computes; ``str(err)`` names the
    file and the refit command."""


class ReaderUnavailableError(EncoderUnavailableError):
    """The English reader's files (rag/reader.py) are missing, half-written or altered, or its
    runtime is missing; ``str(err)`` names the folder and the command that builds it."""
