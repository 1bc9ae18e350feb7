"""Module the stdio fault tests serve in a subprocess (``module:app``); cleanups go to ``FUSION_RELIABILITY_LOG``."""

from reliability_app import make_reliability_app

app, tally = make_reliability_app("reliability-stdio")
