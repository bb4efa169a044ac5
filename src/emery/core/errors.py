"""Errors that describe a user's mistake: the CLI prints them as one line and exits non-zero."""


class EmeryError(Exception):
    """Base of every error caused by input the user can fix (config, data, model names)."""


class ConfigError(EmeryError):
    """A configuration value is missing, misspelled or out of range."""


class DataError(EmeryError):
    """A dataset file or row is malformed; the message names the file, line and field."""


class ModelNotInstalledError(EmeryError):
    """A named model is known but its weights are not installed here."""


class IllegalTransition(EmeryError):
    """A state change a state machine does not allow (resuming a finished job, running a
    finished rollout)."""


class StoreError(EmeryError):
    """The store cannot be opened, read or written: not a database, read-only, unreachable."""
