"""Bad input to ``emery approvals`` and ``emery publish --request``, and a bad ``[job]
approve``: an unknown request or job, an edit without its text, a file that cannot be
read, an approve mode that does not exist. The case's store holds one succeeded job and
no approval request."""

from __future__ import annotations

from cases import PROGRAM, Case, job, train


def approval_cases() -> list[Case]:
    """Each ends with one error line naming what was wrong; nothing is stored."""
    return [
        Case(
            "approvals approve: unknown request",
            ["approvals", "approve", "nope"],
            "no approval request 'nope'",
        ),
        Case(
            "approvals reject: unknown request",
            ["approvals", "reject", "nope", "--reason", "too long"],
            "no approval request 'nope'",
        ),
        Case(
            "approvals show: unknown request",
            ["approvals", "show", "0123abcd"],
            "no approval request '0123abcd'",
        ),
        Case(
            "approvals list: unknown job", ["approvals", "list", "j-nothing"], "no job 'j-nothing'"
        ),
        Case(
            "approvals edit: no text",
            ["approvals", "edit", "nope"],
            "give the new text with --text or --file",
        ),
        Case(
            "approvals edit: text and file",
            ["approvals", "edit", "nope", "--text", "x", "--file", "new.txt"],
            "give the new text with --text or --file",
            {"new.txt": "x"},
        ),
        Case(
            "approvals edit: missing file",
            ["approvals", "edit", "nope", "--file", "missing.txt"],
            "cannot read missing.txt",
        ),
        Case(
            "publish --request: unknown job",
            ["publish", "j-nothing", "--name", "bot", "--request"],
            "no job 'j-nothing'",
        ),
        Case(
            "publish --request: a name with a space",
            ["publish", "j-nothing", "--name", "a b", "--request"],
            "prompt name 'a b' must be 1-100 letters",
        ),
        train(
            "config: job.approve on a fine-tuning job",
            'approve applies to a prompt search, not a type = "sft" job',
            job(
                lm="",
                extra='\n[job]\ntype = "sft"\napprove = "best"\n[sft]\n',
                model="local/smollm2-135m",
            ),
        ),
        train(
            "config: job.approve unknown",
            "job.approve",
            job(extra='\n[job]\napprove = "always"\n') + PROGRAM,
        ),
    ]
