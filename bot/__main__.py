"""``python -m bot``: Telegram, ``--console``, ``--whatsapp`` or ``ask``; see ``bot.cli``."""

import sys

from bot.cli import main

sys.exit(main())
