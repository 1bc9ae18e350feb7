"""CLI tests drive ``python -m fusion_nb`` as a real subprocess, with the SDK's client.

The served process always runs its own asyncio loop (``asyncio.run``); the backends
vary the client side (the SDK client and the harness on asyncio and on trio). The
slowest modules (nginx, export) run on asyncio only: their subject is the servers.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


# the notebooks under data/ are inputs of `fusion-nb`, not teaching notebooks for nbval to run
collect_ignore_glob = ["data/*"]
