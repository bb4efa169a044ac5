"""A first job config, commented, for a data file or a built-in task (``emery init``).

The seed prompt is what a sensible user writes first: the task and the output format the
verifier reads, never tuned to the rows. The rest is a budget that fits a small local
model and the local model itself."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emery.core.errors import DataError
from emery.data.profile import Answers, DataProfile
from emery.data.tasks import builtin_task
from emery.lm.config import DEFAULT_MODEL
from emery.systems.prompt_program import PromptProgramConfig

ALGORITHM = "gepa"
METRIC_CALLS = 120
WALL_TIME_S = 1800
NUMBER_PATTERN = r"Answer:\s*\$?(-?[\d,]*\.?\d+)"
BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class AnswerFormat:
    """How the seed asks for one kind of answer, reads it and scores it."""

    stage: str
    sentence: str
    parser: dict[str, Any]
    verifier: dict[str, Any]
    why: str
    alternative: tuple[str, ...] = ()


def answer_format(answers: Answers) -> AnswerFormat:
    """The format sentence, parser and verifier for the gold outputs' kind."""
    match answers.kind:
        case "numeric":
            return AnswerFormat(
                "solve",
                "End your reply with 'Answer: <number>'.",
                {"kind": "regex", "pattern": NUMBER_PATTERN},
                {"kind": "numeric"},
                "the gold outputs are numbers",
            )
        case "labels":
            return AnswerFormat(
                "classify",
                f"Reply with only the label, one of: {', '.join(answers.labels)}.",
                {"kind": "raw"},
                {"kind": "normalized"},
                f"the gold outputs are {len(answers.labels)} labels; case and punctuation"
                " are ignored",
            )
        case "json":
            keys = ", ".join(answers.keys)
            sentence = (
                f"Reply with a JSON object with the keys {keys} and nothing else."
                if answers.keys
                else "Reply with a JSON object and nothing else."
            )
            return AnswerFormat(
                "extract",
                sentence,
                {"kind": "json_object"},
                {"kind": "json_object"},
                "the gold outputs are JSON objects; key-value F1 (match = 'exact' for all"
                " or nothing)",
            )
        case "text":
            return AnswerFormat(
                "answer",
                "Reply with the answer only.",
                {"kind": "raw"},
                {"kind": "f1"},
                "free text: word-overlap F1 with the gold answer",
                (
                    "To have a judge model grade it instead ([lm.judge], the task model when",
                    "unset), replace the two lines above with:",
                    'kind = "rubric"',
                    'criteria = [{ name = "correct", description = "Says what the gold answer'
                    ' says." }]',
                ),
            )
        case _:
            return AnswerFormat(
                "answer",
                "Reply with the answer only.",
                {"kind": "raw"},
                {
                    "kind": "rubric",
                    "criteria": [
                        {
                            "name": "does the task",
                            "description": "The reply does what the instruction asks,"
                            " correctly and completely.",
                        }
                    ],
                },
                "the rows have no gold output: a judge model grades each reply by these"
                " criteria (write your own)",
            )


def default_task_sentence(inputs: list[str], output: str) -> str:
    """ "Given the question, give the answer." from the column names."""
    words = [name.replace("_", " ") for name in inputs]
    given = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return f"Given the {given}, give the {output.replace('_', ' ')}."


def file_config(data: DataProfile, output: str, task: str, config_dir: Path, command: str) -> str:
    """The config text for the data file ``data`` with gold outputs in ``output`` and the
    seed instruction ``task`` followed by the output format."""
    answers = data.answers(output)
    fmt = answer_format(answers)
    inputs = data.inputs(output)
    usable = [name for name in inputs if name.isidentifier()]
    if not usable:
        raise DataError(
            f"{data.path}: no input column can be a {{placeholder}} (letters, digits, _)"
        )
    program = _program(data.name, fmt, f"{task} {fmt.sentence}", usable)
    lines = _header(command, data.name)
    lines += ["[dataset]", f"path = {_value(_relative(data.path, config_dir))}"]
    lines += _split_lines(data)
    if not data.structured:
        lines += ["", "[dataset.fields]", f"input_fields = {_value(inputs)}"]
        lines += [f"expected_field = {_value(output)}"]
    if len(usable) < len(inputs):
        skipped = ", ".join(name for name in inputs if name not in usable)
        lines += [f"# not in the prompt (not usable as a {{placeholder}}): {skipped}"]
    if not data.splits or sum(data.splits.values()) < data.rows:
        lines += ["", "[dataset.split]", "train = 0.5", "val = 0.25", "test = 0.25"]
    lines += ["", *_system_lines(program)]
    verifier, why = (
        (data.verifier, "the task set's own") if data.verifier else (fmt.verifier, fmt.why)
    )
    lines += ["", "[verifier]", f"# {why}"]
    lines += [f"{key} = {_value(value)}" for key, value in verifier.items()]
    lines += [f"# {line}" for line in fmt.alternative if not data.verifier]
    return "\n".join([*lines, "", *_model_lines()])


def task_config(name: str, command: str) -> str:
    """The config text for built-in task ``name``: its own seed system and verifier."""
    task = builtin_task(name)
    lines = _header(command, name)
    lines += ["[dataset]", f"task = {_value(name)}", f"# {task.description}"]
    sizes = dict(zip(("train", "val", "test"), task.sizes, strict=True))
    lines += [f"# generated with dataset.seed: {_counts(sizes)} (n_train, n_val, n_test)"]
    lines.append("")
    if task.program is not None:
        lines += _system_lines(task.program)
    else:
        lines += ["# [system]: the task's own starting system (not a prompt program)"]
    verifier = task.verifier.model_dump(mode="json", exclude_defaults=True)
    lines += ["", "[verifier]", f"kind = {_value(task.verifier.kind)}"]
    lines += [f"{key} = {_value(value)}" for key, value in verifier.items() if key != "kind"]
    return "\n".join([*lines, "", *_model_lines()])


def _header(command: str, name: str) -> list[str]:
    return [
        f"# Written by `{command}`. Edit it freely, then: emery train <this file>",
        "# Change a value for one run without editing: --set job.budget.metric_calls=50",
        "",
        "[job]",
        f"name = {_value(name)}",
        f"algorithm = {_value(ALGORITHM)}   # gepa, mipro, apo, or baseline (score the seed)",
        "",
        "[job.budget]   # the search stops at whichever comes first",
        f"metric_calls = {METRIC_CALLS}   # examples scored, the seed's included",
        f"wall_time_s = {WALL_TIME_S}",
        "",
    ]


def _split_lines(data: DataProfile) -> list[str]:
    if data.splits:
        rest = data.rows - sum(data.splits.values())
        tail = f"; rows without one ({rest}) are divided as below" if rest else ""
        return [f"# {data.rows} rows; the file's split column: {_counts(data.splits)}{tail}"]
    return [
        f"# {data.rows} rows, no split column: they are shuffled with dataset.seed and cut",
        "# into train (searched), val (picks the best) and test (the final score, never",
        "# searched) by the shares below; n_train, n_val, n_test keep the first N of each.",
    ]


def _counts(sizes: Mapping[str, int]) -> str:
    return ", ".join(f"{count} {split}" for split, count in sizes.items())


def _program(name: str, fmt: AnswerFormat, instruction: str, inputs: list[str]) -> Any:
    template = "\n".join(
        f"{field.replace('_', ' ').capitalize()}: {{{field}}}"
        if len(inputs) > 1
        else f"{{{field}}}"
        for field in inputs
    )
    return PromptProgramConfig.model_validate(
        {
            "name": name,
            "stages": [
                {
                    "name": fmt.stage,
                    "instruction": instruction,
                    "messages": [{"role": "user", "template": template}],
                    "parser": fmt.parser,
                }
            ],
        }
    )


def _system_lines(program: PromptProgramConfig) -> list[str]:
    """``[system]`` with one ``[[system.stages]]`` table per stage, settings inline."""
    lines = [
        "# The seed prompt the search starts from: the task and the output format.",
        "[system]",
        'kind = "prompt_program"',
    ]
    for stage in program.stages:
        lines.append("[[system.stages]]")
        dumped = stage.model_dump(mode="json", exclude_defaults=True)
        dumped.setdefault("parser", {"kind": "raw"})
        lines += [f"{key} = {_value(value)}" for key, value in dumped.items()]
    return lines


def _model_lines() -> list[str]:
    local = DEFAULT_MODEL.removeprefix("local/")
    return [
        "[lm.task]",
        f"# install it with: emery models pull {local}; or openai/<model> (with base_url for",
        "# another server) and OPENAI_API_KEY in the environment or a .env file",
        f"model = {_value(DEFAULT_MODEL)}",
        "max_tokens = 200",
        "",
        "[runtime]",
        "concurrency = 4   # examples run at once",
        "",
    ]


def _relative(path: Path, config_dir: Path) -> str:
    target = path.resolve()
    try:
        return Path(os.path.relpath(target, config_dir.resolve())).as_posix()
    except ValueError:  # another drive
        return target.as_posix()


def _value(value: Any) -> str:
    """``value`` as a TOML value (inline tables and arrays for nested data)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, Iterable):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _key(key: str) -> str:
    return key if BARE_KEY.match(key) else _value(key)
