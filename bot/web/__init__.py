"""The web channel: the bot on a page in the browser (``python -m bot --web``; ``bot.web.app``)."""
