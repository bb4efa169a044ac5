"""A module that fails while it is imported (``python/raises_on_import:lm``)."""

raise RuntimeError("this module fails at import time")
