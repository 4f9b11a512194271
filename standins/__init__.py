"""Real local HTTP servers shaped like the remote services (Sarvam, Telegram, OpenRouter).

Tests and the dev script run them on 127.0.0.1 and point the real clients at them.
"""
