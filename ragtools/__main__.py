import sys

from ragtools.cli import main

sys.exit(main())
