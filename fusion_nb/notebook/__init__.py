"""The notebook host: ``%load_ext fusion_nb`` registers ``%%fusion_tool`` and ``%fusion``."""

from ._extension import current_host, load_ipython_extension, script_answers, server, unload_ipython_extension
from .cell_tool import preview

__all__ = ["current_host", "load_ipython_extension", "preview", "script_answers", "server", "unload_ipython_extension"]
