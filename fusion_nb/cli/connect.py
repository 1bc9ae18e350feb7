"""placeholder"""

from typing import Any


def add_parser(commands: Any) -> None:
    """placeholder"""
