"""Engine names this package needs that older engines did not export yet (issue 10 in flight).

Removed once ``fusion_nb.engine`` exports ``validate_form`` on main.
"""

from __future__ import annotations

try:
    from fusion_nb.engine import validate_form  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # pragma: no cover - until the engine's re-exports land
    from fusion_nb.engine.ask import validate_form  # type: ignore[no-redef,unused-ignore]

__all__ = ["validate_form"]
