"""Clients of remote services (Sarvam speech-to-text and text-to-speech, OpenRouter), sharing one
httpx base (``clients.http.ServiceClient``). Every failure surfaces as ``rag.errors.ServiceError``,
the core's contract for a failed remote dependency; ``rag`` never imports this package."""
