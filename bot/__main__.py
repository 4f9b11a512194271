"""``python -m bot``: the Telegram bot (``--console`` for a terminal chat); see ``bot.app``."""

import sys

from bot.app import main

sys.exit(main())
