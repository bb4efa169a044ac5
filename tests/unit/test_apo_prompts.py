"""Critique and edit prompt files: the shipped ones, and user files given through config."""

from __future__ import annotations

from pathlib import Path

import pytest
from events_support import payloads
from test_apo_support import GOOD, context, fenced, reflection_lm, run

from emery.algorithms import build_algorithm, parse_settings
from emery.algorithms.apo.events import ApoCritique, ApoEdit
from emery.algorithms.apo.prompts import (
    DEFAULT_FILES,
    REQUIRED_FIELDS,
    PromptKind,
    load_prompts,
)
from emery.core.errors import ConfigError
from emery.systems.templates import placeholders


@pytest.mark.parametrize("kind", ["critique", "edit"])
def test_shipped_prompts_load_and_use_their_fields(kind: PromptKind) -> None:
    prompts = load_prompts(kind)
    assert [p.name for p in prompts] == [Path(f).stem for f in DEFAULT_FILES[kind]]
    for prompt in prompts:
        assert REQUIRED_FIELDS[kind] <= placeholders(prompt.text)
        assert "never solve" in prompt.system
        assert "{placeholders}" in prompt.text or kind == "critique" or prompt.append
    assert [p.append for p in prompts] == ([False, True] if kind == "edit" else [False] * 3)


def test_shipped_prompts_are_files_in_the_package() -> None:
    folder = Path(__file__).parents[2] / "src" / "emery" / "algorithms" / "apo" / "prompts"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        name for names in DEFAULT_FILES.values() for name in names
    )


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


async def test_user_prompt_files_replace_the_shipped_ones(tmp_path: Path) -> None:
    critique = _write(
        tmp_path,
        "terse.txt",
        "CUSTOM CRITIQUE of {prompt} ({component}). Here is what the checker said:\n"
        "{experiments}\nKeep {{braces}}.",
    )
    edit = _write(
        tmp_path, "mine.md", "CUSTOM EDIT of {prompt} given {critique}; keep {placeholders}"
    )
    reflection = reflection_lm([fenced(GOOD)])
    ctx = context(reflection)
    apo = build_algorithm(
        "apo",
        {
            "rounds": 1,
            "beam_width": 1,
            "branch_factor": 1,
            "critique_prompts": [str(critique)],
            "edit_prompts": [str(edit)],
        },
    )
    _, records = await run(ctx, apo)
    critique_request, edit_request = (call[-1]["content"] for call in reflection.calls)
    assert critique_request.startswith(
        "CUSTOM CRITIQUE of Reply. (solve). Here is what the checker said:"
    )
    assert critique_request.endswith("Keep {braces}.")
    assert edit_request.startswith("CUSTOM EDIT of Reply. given - no answer line")
    (critique,) = payloads(records, ApoCritique)
    (edit_event,) = payloads(records, ApoEdit)
    assert [critique.variant, edit_event.variant] == ["terse", "mine"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Critique {prompt} please.", "critique prompt .* must contain {experiments}"),
        ("{prompt} {experiments} {examples}", "unknown placeholder {examples}"),
    ],
)
def test_bad_user_prompt_files_are_config_errors(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, "bad.txt", text)
    with pytest.raises(ConfigError, match=message):
        parse_settings("apo", {"critique_prompts": [str(path)]})
    with pytest.raises(ConfigError, match=message):
        load_prompts("critique", [path])


def test_prompt_file_sections(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "two.md",
        "[append]\n[system]\nYou edit {component} prompts.\n[user]\nFix {prompt} per {critique}.",
    )
    (template,) = load_prompts("edit", [path])
    assert template.append
    assert template.messages(prompt="P", critique="C", component="solve") == [
        {"role": "system", "content": "You edit solve prompts."},
        {"role": "user", "content": "Fix P per C."},
    ]
    plain = _write(tmp_path, "one.md", "Fix {prompt} per {critique}.")
    assert load_prompts("edit", [plain])[0].messages(prompt="P", critique="C") == [
        {"role": "user", "content": "Fix P per C."}
    ]
    no_user = _write(tmp_path, "nouser.md", "[system]\nFix {prompt} per {critique}.")
    with pytest.raises(ConfigError, match=r"\[system\] part but no \[user\] line"):
        load_prompts("edit", [no_user])
    appended = _write(tmp_path, "crit.md", "[append]\n{prompt} {experiments}")
    with pytest.raises(ConfigError, match=r"only edit prompts may be \[append\]"):
        load_prompts("critique", [appended])


def test_missing_empty_or_clashing_prompt_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"algorithm\.apo\.edit_prompts: edit prompt file not found"
    ):
        parse_settings("apo", {"edit_prompts": [str(tmp_path / "nope.md")]})
    with pytest.raises(ConfigError, match="edit_prompts is empty"):
        parse_settings("apo", {"edit_prompts": []})
    a = _write(tmp_path, "same.md", "{prompt} {critique}")
    (tmp_path / "other").mkdir()
    b = _write(tmp_path / "other", "same.md", "{prompt} {critique}!")
    with pytest.raises(ConfigError, match="share the name 'same'"):
        parse_settings("apo", {"edit_prompts": [str(a), str(b)]})
    with pytest.raises(ConfigError, match=r"must contain \{critique\}"):
        parse_settings("apo", {"edit_prompts": [str(_write(tmp_path, "e.md", "{prompt}"))]})


def test_unknown_settings_and_roles_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="did you mean 'beam_width'"):
        parse_settings("apo", {"beam_widht": 3})
    with pytest.raises(ConfigError, match="unknown LM role 'critic'"):
        parse_settings("apo", {"gradient_role": "critic"})
    with pytest.raises(ConfigError, match=r"algorithm\.apo\.rounds"):
        parse_settings("apo", {"rounds": 0})
