"""A module app whose sync tools end the way command-line code ends: ``sys.exit``, argparse, Ctrl-C."""

import argparse
import sys

from fusion_nb import Fusion

app = Fusion("exiting")


@app.f.action("exits").handle
def exits(input, ctx):
    sys.exit(3)


@app.f.action("parses").handle
def parses(input, ctx):
    argparse.ArgumentParser(prog="tool").parse_args(["--no-such-flag"])  # SystemExit(2)


@app.f.action("interrupts").handle
def interrupts(input, ctx):
    raise KeyboardInterrupt


@app.f.query("echo").with_string("text").handle
def echo(input, ctx):
    return input.text
