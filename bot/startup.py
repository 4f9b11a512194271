"""Start-up checks every front end needs, failing loudly with the fix: ffmpeg and the index
(built first when ``BOT_BUILD_INDEX=1``), and a warning when SARVAM_API_KEY is missing
(:func:`check_startup`). A front end's own checks are its own: Telegram's token, webhook secret
and getMe are ``bot.telegram.startup``, the web page's exposure is ``bot.web.app``."""

from __future__ import annotations

import logging

from bot.chat.audio import ffmpeg_available
from bot.errors import StartupError
from bot.settings import Settings

log = logging.getLogger(__name__)


def check_startup(settings: Settings) -> None:
    """Check ffmpeg and the index; build the index first when ``BOT_BUILD_INDEX=1`` and it is
    missing; warn when SARVAM_API_KEY is not set.

    Raises:
        StartupError: the first problem found.
    """
    if not ffmpeg_available():
        raise StartupError("ffmpeg is not installed, so voice notes cannot be decoded: "
                           "apt-get install ffmpeg (pip's ffmpeg-python is not ffmpeg)")
    index_dir = settings.rag.index_dir
    if not (index_dir / "meta.json").is_file():
        if not settings.bot.build_index:
            raise StartupError(f"no index at {index_dir}: build it with `python -m ragtools "
                               "build-index` (minutes), set VOICE_RAG_INDEX_DIR to an existing "
                               "index, or set BOT_BUILD_INDEX=1 to build it at start-up")
        _build_index(settings)
    if not settings.sarvam.api_key:
        log.warning("startup SARVAM_API_KEY is not set: voice notes will be answered with "
                    "'speech service not available'")


def _build_index(settings: Settings) -> None:
    """The one build step the bot runs itself, asked for by ``BOT_BUILD_INDEX=1``: what
    ``python -m ragtools build-index`` does (corpus, then the encoder's model folder, then the
    index), without its progress output."""
    from rag.corpus import read_passages
    from rag.encoders import load_encoder
    from ragtools.build import ensure_encoder_files, resolve_corpus
    from ragtools.index_build import build_index

    corpus = resolve_corpus(settings.rag)
    log.warning("startup building index dir=%s corpus=%s (minutes on 2 cores)",
                settings.rag.index_dir, corpus)
    ensure_encoder_files(settings.rag.encoder)
    meta = build_index(read_passages(corpus), load_encoder(settings.rag.encoder),
                       settings.rag.index_dir)
    log.info("startup index built n_passages=%s build_s=%.0f", meta.n_passages, meta.build_s)
