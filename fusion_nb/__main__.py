"""``python -m fusion_nb``: the same command line as the ``fusion-nb`` console script."""

from .cli import console_main

if __name__ == "__main__":
    console_main()
