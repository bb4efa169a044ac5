"""Every ``emery`` command the documentation shows exists, and so does every config key it
names.

The pages are the site's (``mkdocs.yml``): the README, ``docs/`` and the example and
benchmark READMEs. A command is a line of a shell block (``sh``, ``bash``, ``console``'s
``$`` lines, a block with no language) or a code span that starts with ``emery``; its
command and subcommand names and its options are looked up in the CLI's own click tree, so
a renamed command or option fails here. A config key is a code span such as ``[job]
warm_start`` or a ``--set KEY=VALUE`` of a shown command, looked up in the ``JobConfig``
schema (a system's or verifier's key in the settings of some built-in kind, an
algorithm's in its settings model). The TOML blocks are checked whole by
``test_readme_configs.py``.
"""

from __future__ import annotations

import re
import shlex
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from pydantic import BaseModel

from emery.algorithms.registry import ALGORITHMS
from emery.cli.app import app
from emery.config import JobConfig
from emery.systems.registry import SYSTEM_KINDS
from emery.verifiers.config import VERIFIERS

REPO = Path(__file__).resolve().parents[2]
PAGES = [
    REPO / "README.md",
    *sorted((REPO / "docs").rglob("*.md")),
    *sorted(REPO.glob("examples/*/README.md")),
    *sorted(REPO.glob("benchmarks/*/README.md")),
]
SHELLS = {"", "sh", "bash", "shell", "console"}
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)
SPAN = re.compile(r"(?<!`)`(?!`)(?P<code>[^`\n]+)`(?!`)")
KEY_SPAN = re.compile(r"^\[(?P<section>[a-z_][\w.]*)\] (?P<key>[a-z_]\w*)\b")
ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")
OPERATORS = set("();<>|&")


def page_name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def shell_lines(block: str, lang: str) -> Iterator[str]:
    """A shell block's commands, continuation lines joined; a console block's ``$`` lines."""
    joined = re.sub(r"\\\n\s*", " ", block)
    for line in joined.splitlines():
        if lang == "console":
            if line.startswith("$ "):
                yield line[2:]
        else:
            yield line.removeprefix("$ ")


def shown_code(page: Path) -> Iterator[str]:
    """Each shell line and each code span of ``page`` (spans outside fenced blocks)."""
    text = page.read_text(encoding="utf-8")
    for block in FENCE.finditer(text):
        if block["lang"] in SHELLS:
            yield from shell_lines(block["body"], block["lang"])
    for span in SPAN.finditer(FENCE.sub("", text)):
        yield span["code"]


def tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote in prose: no command to check
        return []


def emery_commands(line: str) -> Iterator[list[str]]:
    """The arguments after each ``emery`` that runs in ``line`` (pipes, ``&&``, ``;`` and
    redirections end a command; ``VAR=value`` before it is skipped)."""
    command: list[str] = []
    for token in [*tokens(line), ";"]:
        if set(token) <= OPERATORS:
            if command and Path(command[0]).name == "emery":
                yield command[1:]
            command = []
        elif command or not ENV.match(token):
            command.append(token)


def documented_commands() -> list[tuple[str, list[str]]]:
    """``(page, arguments)`` for each distinct command a page shows."""
    found = {
        (page_name(page), tuple(args))
        for page in PAGES
        for code in shown_code(page)
        for args in emery_commands(code)
    }
    return [(page, list(args)) for page, args in sorted(found)]


COMMANDS = documented_commands()
ROOT = typer.main.get_command(app)


def option_names(command: Any, ctx: Any) -> set[str]:
    names = {
        name for param in command.get_params(ctx) for name in param.opts + param.secondary_opts
    }
    return names | set(ctx.help_option_names)


def cli_problems(args: list[str]) -> list[str]:
    """What in ``emery ARGS`` the CLI does not have: a command or an option."""
    command: Any = ROOT
    path = ["emery"]
    ctx = command.context_class(command, info_name="emery")
    problems = []
    positional = False
    for raw in args:
        arg = raw.strip("[]")
        if arg == "--":
            break
        if arg.startswith("-") and not re.fullmatch(r"-[\d.]+", arg):
            name = arg.split("=", 1)[0]
            if name not in option_names(command, ctx):
                problems.append(f"{' '.join(path)} has no option {name}")
        elif hasattr(command, "list_commands") and not positional:  # a group
            if "|" in arg:  # `emery jobs list|show|events`: each of them, and no further
                missing = [name for name in arg.split("|") if not command.get_command(ctx, name)]
                problems.extend(f"{' '.join(path)} has no command {name!r}" for name in missing)
                break
            sub = command.get_command(ctx, arg)
            if sub is None:
                problems.append(f"{' '.join(path)} has no command {arg!r}")
                break
            command = sub
            path.append(arg)
            ctx = command.context_class(command, info_name=arg, parent=ctx)
        else:
            positional = True
    return problems


def set_keys(args: list[str]) -> Iterator[str]:
    """The keys of a command's ``--set KEY=VALUE`` overrides."""
    for at, option in enumerate(args):
        value = args[at + 1] if at + 1 < len(args) else ""
        if option == "--set" and "=" in value:
            yield value.split("=", 1)[0]
        elif option.startswith("--set="):
            yield option.removeprefix("--set=").split("=", 1)[0]


def model_of(annotation: Any) -> Any:
    """The model or mapping a field holds (``X | None`` is ``X``)."""
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return model_of(args[0]) if len(args) == 1 else annotation
    if typing.get_origin(annotation) is typing.Annotated:
        return model_of(args[0])
    return annotation


def kinds_fields(registry: Any) -> set[str]:
    return {field for name in registry.builtins for field in registry.get(name).config.model_fields}


def key_problem(path: list[str]) -> str | None:
    """Why the config key ``path`` (``["job", "budget", "lm_tokens"]``) is not in the
    schema, or None when it is."""
    where = ".".join(path)
    section = path[0]
    if section in ("system", "verifier") and len(path) > 1:
        fields = kinds_fields(SYSTEM_KINDS if section == "system" else VERIFIERS)
        return None if path[1] in fields else f"{where}: no {section} kind has {path[1]!r}"
    node: Any = JobConfig
    for depth, part in enumerate(path):
        if section == "algorithm" and depth == 1:
            if part not in ALGORITHMS.builtins:
                return None  # a plug-in's own settings
            node = ALGORITHMS.get(part).settings
            continue
        if isinstance(node, type) and issubclass(node, BaseModel):
            if part not in node.model_fields:
                return f"{where}: {'.'.join(path[:depth]) or 'the config'} has no key {part!r}"
            node = model_of(node.model_fields[part].annotation)
        elif typing.get_origin(node) is dict:
            node = model_of(typing.get_args(node)[1])
        elif node is Any:
            return None
        else:
            return f"{where}: {'.'.join(path[:depth])} is a value, not a table"
    return None


def documented_keys() -> list[tuple[str, str]]:
    """``(page, dotted key)`` for each distinct key a page names."""
    found: set[tuple[str, str]] = set()
    for page in PAGES:
        for code in shown_code(page):
            if match := KEY_SPAN.match(code):
                found.add((page_name(page), f"{match['section']}.{match['key']}"))
            for args in emery_commands(code):
                found.update((page_name(page), key) for key in set_keys(args))
    return sorted(found)


KEYS = documented_keys()


def test_the_docs_show_commands_and_keys() -> None:
    shown = {args[0] for _, args in COMMANDS if args}
    assert {"train", "jobs", "server", "prompts", "report"} <= shown
    assert len(COMMANDS) > 100
    assert len(KEYS) > 40
    assert {page for page, _ in KEYS} >= {"README.md", "docs/configuration.md"}


@pytest.mark.parametrize(("page", "args"), COMMANDS, ids=lambda value: str(value)[:60])
def test_each_documented_command_exists(page: str, args: list[str]) -> None:
    assert cli_problems(args) == [], f"{page}: emery {' '.join(args)}"


KNOWN_DRIFT: set[tuple[str, str]] = set()
"""Keys a page names that the schema does not have, left to the page's owner: each fails
the test below once it is fixed (``strict``), so that it is taken off this list."""


@pytest.mark.parametrize(
    ("page", "key"),
    [
        pytest.param(
            *found,
            marks=pytest.mark.xfail(found in KNOWN_DRIFT, reason="known drift", strict=True),
        )
        for found in KEYS
    ],
    ids=str,
)
def test_each_documented_config_key_exists(page: str, key: str) -> None:
    assert key_problem(key.split(".")) is None, page


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["jobs", "watch", "JOB"], "emery jobs has no command 'watch'"),
        (["jobs", "events", "JOB", "--follow"], None),
        (["train", "job.toml", "--sett", "x=1"], "emery train has no option --sett"),
        (["prompts", "show", "NAME", "[--version", "1]", "[--json]"], None),
        (["server", "--port", "8420"], None),
        (["jobs", "list|show|events"], None),
        (["prompts", "list|show|publish"], "emery prompts has no command 'publish'"),
    ],
)
def test_a_command_is_checked_against_the_cli(args: list[str], problem: str | None) -> None:
    assert cli_problems(args) == ([problem] if problem else [])


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("job.budget.lm_tokens", None),
        ("job.budget.lm_calls", "job.budget.lm_calls: job.budget has no key 'lm_calls'"),
        ("lm.task.base_url", None),
        ("algorithm.gepa.components", None),
        ("algorithm.gepa.rounds", "algorithm.gepa.rounds: algorithm.gepa has no key 'rounds'"),
        ("verifier.abs_tol", None),
        ("system.instructions_of", "system.instructions_of: no system kind has 'instructions_of'"),
        ("job.type.x", "job.type.x: job.type is a value, not a table"),
    ],
)
def test_a_key_is_checked_against_the_schema(key: str, problem: str | None) -> None:
    assert key_problem(key.split(".")) == problem


def test_commands_are_found_in_shell_lines() -> None:
    line = "EMERY_RUNNER_KEY=k emery runner --server http://h:8420 | tee log && emery jobs list"
    assert list(emery_commands(line)) == [
        ["runner", "--server", "http://h:8420"],
        ["jobs", "list"],
    ]
    assert list(emery_commands("emery demo --show-config > job.toml  # the demo")) == [
        ["demo", "--show-config"]
    ]
