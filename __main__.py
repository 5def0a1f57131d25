"""``python -m nodwyn_retrieval``: the command line."""

from __future__ import annotations

import sys

from nodwyn_retrieval.cli import main

if __name__ == "__main__":
    sys.exit(main())
