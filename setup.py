"""Package discovery, the one thing pyproject.toml cannot say: every ``fusion_nb`` package the
tree holds, plus the top-level ``widgets/`` folder installed as ``fusion_nb.widgets``
(SPEC section 1). Discovered, never listed: a new subpackage cannot be left out of the wheel.
"""

from setuptools import find_packages, setup

WIDGETS = "fusion_nb.widgets"

setup(
    packages=[
        *find_packages(include=["fusion_nb", "fusion_nb.*"]),
        WIDGETS,
        *(f"{WIDGETS}.{name}" for name in find_packages("widgets")),
    ],
    package_dir={WIDGETS: "widgets"},
)
