"""Bad input to ``emery dataset from-traces``: no template or one without a field, a stage
the config does not have, bad times, attribute filters, redaction patterns, split shares
and output paths. Each ends with one error line; no file is written."""

from __future__ import annotations

from cases import PROGRAM, Case, job

BASE = ["dataset", "from-traces", "--out", "traces.jsonl"]
T = ["--template", "Question: {question}"]


def _case(name: str, expect: str, *args: str, files: dict[str, str | bytes] | None = None) -> Case:
    return Case(f"from-traces: {name}", [*BASE, *args], expect, files or {})


def fromtraces_cases() -> list[Case]:
    """Each names what was wrong in one line."""
    return [
        _case("no template", "give a template ({field} text) or a stage"),
        _case("template and stage", "give a template", *T, "--stage", "job.toml"),
        _case("template without a field", "no {field} placeholder", "--template", "Hello"),
        _case(
            "unknown stage",
            "job.toml has no stage 'nope' (stages: answer)",
            "--stage",
            "job.toml:nope",
            files={"job.toml": job() + PROGRAM},
        ),
        _case("missing stage config", "not found", "--stage", "absent.toml:answer"),
        _case("bad --since", "--since 'last tuesday' is not an ISO", *T, "--since", "last tuesday"),
        _case(
            "empty time range",
            "the time range is empty",
            *T,
            "--since",
            "2026-12-01",
            "--until",
            "2026-11-01",
        ),
        _case(
            "attribute without =",
            "attribute filter 'tenant' must be KEY=VALUE",
            *T,
            "--attr",
            "tenant",
        ),
        _case(
            "bad redaction regex",
            "redaction pattern '(x' is not a valid regex",
            *T,
            "--redact",
            "(x",
        ),
        _case(
            "bad redaction function",
            "must look like 'module:attribute'",
            *T,
            "--redact-function",
            "nope",
        ),
        _case("two split shares", "must be three shares", *T, "--split", "0.5,0.5"),
        _case("negative split share", "must be three shares", *T, "--split", "1,-1,1"),
        Case(
            "from-traces: output folder missing",
            ["dataset", "from-traces", "--out", "no/such/traces.jsonl", *T],
            "the folder no/such does not exist",
        ),
        _case("no call matches", "no examples, nothing written", *T, "--service", "nobody"),
    ]
