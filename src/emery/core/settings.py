"""The base of every model a user writes in a config file.

Unknown keys are errors, and so are ``inf`` and ``nan``: a bound such as ``gt=0`` lets
``inf`` through (``learning_rate = inf`` would train to NaN weights), and ``nan`` fails
every comparison, so no setting of a config may hold either.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Settings(BaseModel):
    """A config section: unknown keys, ``inf`` and ``nan`` are refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
