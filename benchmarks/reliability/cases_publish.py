"""Bad input to ``emery publish`` and ``emery prompts``: an unknown job, a name that cannot
name a prompt, an unknown prompt or version. The case's store holds one succeeded job and
no published prompt."""

from __future__ import annotations

from cases import Case


def publish_cases() -> list[Case]:
    """Each ends with one error line naming what was wrong; no prompt is stored."""
    return [
        Case(
            "publish: unknown job", ["publish", "j-nothing", "--name", "bot"], "no job 'j-nothing'"
        ),
        Case(
            "publish: a name with a slash",
            ["publish", "j-nothing", "--name", "a/b"],
            "prompt name 'a/b' must be 1-100 letters",
        ),
        Case(
            "prompts show: unknown name",
            ["prompts", "show", "nobody"],
            "no published prompt 'nobody'",
        ),
        Case(
            "prompts show: version 0",
            ["prompts", "show", "bot", "--version", "0"],
            "a prompt version is a number from 1 to 2147483647, not 0",
        ),
        Case(
            "prompts rollback: unknown name",
            ["prompts", "rollback", "nobody", "--to", "1"],
            "no published prompt 'nobody'",
        ),
        Case(
            "prompts list: unknown name",
            ["prompts", "list", "nobody"],
            "no published prompt 'nobody'",
        ),
    ]
