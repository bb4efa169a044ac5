"""Verifiers: turn (example, output, trace) into a score in [0, 1] and textual feedback."""

from emery.verifiers.base import SyncVerifier, Verdict, Verifier
from emery.verifiers.config import VerifierConfig, build_verifier
from emery.verifiers.json_field import JsonFieldMatch
from emery.verifiers.numeric import NumericMatch
from emery.verifiers.python import CallableVerifier
from emery.verifiers.text import Contains, ExactMatch, NormalizedMatch, RegexMatch, TokenF1

__all__ = [
    "CallableVerifier",
    "Contains",
    "ExactMatch",
    "JsonFieldMatch",
    "NormalizedMatch",
    "NumericMatch",
    "RegexMatch",
    "SyncVerifier",
    "TokenF1",
    "Verdict",
    "Verifier",
    "VerifierConfig",
    "build_verifier",
]
