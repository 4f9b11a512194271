"""The vectors of texts embedded lately, so the same text is not embedded twice.

A burst of one question from many chats (issue 24: 40 copies of a question near the
answerability gate's threshold) embedded the question and its selected answer once per copy:
two encoder calls each, queued behind one lock. Embedding is deterministic for a given text,
prefix and call shape, so a text's vector can be kept and handed out again unchanged.

    cache = EmbeddingCache(max_entries=1024)
    vector = cache.get(("query", text))           # None when not kept
    cache.put(("query", text), vector)            # float32 (dim,), kept read-only
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np

MAX_ENTRIES = 1024
"""Vectors kept (least recently used dropped first): 1024 × 384 float32 = 1.5 MB. A burst
needs two (its question and its answer); 1024 covers the questions of several busy minutes."""


class EmbeddingCache:
    """Thread-safe LRU map from a key (kind of text, text) to its float32 (dim,) vector.

    Stored vectors are made read-only, so a caller cannot change what others get back;
    ``max_entries`` 0 keeps nothing.
    """

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._vectors: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> np.ndarray | None:
        with self._lock:
            vector = self._vectors.get(key)
            if vector is not None:
                self._vectors.move_to_end(key)
            return vector

    def put(self, key: Hashable, vector: np.ndarray) -> np.ndarray:
        """Keep ``vector`` (a read-only copy) under ``key``; returns the copy kept."""
        kept = np.array(vector, dtype=np.float32)
        kept.flags.writeable = False
        if self.max_entries <= 0:
            return kept
        with self._lock:
            self._vectors[key] = kept
            self._vectors.move_to_end(key)
            while len(self._vectors) > self.max_entries:
                self._vectors.popitem(last=False)
        return kept

    def __len__(self) -> int:
        return len(self._vectors)
