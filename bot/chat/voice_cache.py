"""Voice replies already made, kept in memory so a repeated answer is not synthesised (and paid
for) twice: a least-recently-used cache (``cachetools.LRUCache``) capped in bytes of audio."""

from __future__ import annotations

from dataclasses import dataclass

from cachetools import LRUCache


@dataclass(frozen=True, slots=True)
class VoiceAudio:
    """A voice note ready to send: ``ogg`` is OGG/Opus bytes (what Telegram's ``sendVoice``
    plays as a voice message), ``duration_s`` its length in seconds."""

    ogg: bytes
    duration_s: float


VoiceKey = tuple[str, str, str, str]
"""(text, language code, speaker, model): everything that changes what is heard."""


class VoiceCache:
    """At most ``max_bytes`` bytes of OGG audio, least recently used evicted first; 0 keeps
    nothing. ``n_hits``/``n_misses`` count lookups. Not thread-safe: use it on the event loop."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._cache: LRUCache[VoiceKey, VoiceAudio] | None = (
            LRUCache(maxsize=max_bytes, getsizeof=lambda audio: len(audio.ogg))
            if max_bytes > 0 else None)
        self.n_hits = self.n_misses = 0

    def get(self, key: VoiceKey) -> VoiceAudio | None:
        """The audio stored under ``key`` (now the most recently used), else None."""
        audio = self._cache.get(key) if self._cache is not None else None
        if audio is None:
            self.n_misses += 1
        else:
            self.n_hits += 1
        return audio

    def put(self, key: VoiceKey, audio: VoiceAudio) -> bool:
        """Keep ``audio`` under ``key``, evicting the least recently used to make room; False
        (nothing kept) when the cache is off or the audio alone is over ``max_bytes``."""
        if self._cache is None or len(audio.ogg) > self.max_bytes:
            return False
        self._cache[key] = audio
        return True

    @property
    def n_bytes(self) -> int:
        """Bytes of audio held now."""
        return int(self._cache.currsize) if self._cache is not None else 0

    def __len__(self) -> int:
        return len(self._cache) if self._cache is not None else 0
