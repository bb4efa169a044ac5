"""The reflective dataset, the reflection prompt and the checks on what comes back."""

from __future__ import annotations

from pathlib import Path

import pytest

from emery.algorithms.gepa.checks import (
    copied_input,
    looks_like_answer,
    parse_proposal,
)
from emery.algorithms.gepa.compact import parse_compact
from emery.algorithms.gepa.reflection import (
    check_prompt,
    load_prompt,
    placeholder_note,
    reflection_messages,
    retry_messages,
)
from emery.algorithms.gepa.reflective_dataset import (
    build_records,
    excerpt,
    render_compact,
    render_records,
)
from emery.algorithms.proposal_checks import repeats_itself
from emery.algorithms.registry import parse_settings
from emery.core.errors import ConfigError
from emery.core.example_result import ExampleResult
from emery.core.models import Example
from emery.systems.base import ComponentCall

QUESTION = "Jamal had 65 coins and gave away 19. How many coins does Jamal have left?"


def result(example_id: str, score: float, reply: str, feedback: str) -> ExampleResult:
    return ExampleResult(
        candidate_id="c",
        example_id=example_id,
        score=score,
        feedback=feedback,
        calls=[
            ComponentCall(component="draft", inputs={"question": "q"}, reply="draft text"),
            ComponentCall(component="solve", inputs={"question": QUESTION}, reply=reply),
        ],
    )


def test_records_show_the_component_call_feedback_expected_and_upstream_trace() -> None:
    examples = [
        Example(id="e1", input={"question": QUESTION}, expected=46),
        Example(id="e2", input={"question": "Other?"}, expected=3),
    ]
    results = [
        result("e1", 1.0, "65 - 19 = 46\nAnswer: 46", "Correct: 46."),
        result("e2", 0.0, "It is \\boxed{3}", "Expected the number 3 ..."),
    ]
    records = build_records("solve", examples, results, excerpt_chars=200, show_expected=True)
    assert [r.example_id for r in records] == ["e2", "e1"]  # failures first
    failure = records[0]
    assert failure.reply == "It is \\boxed{3}"
    assert failure.expected == "3"
    assert failure.trace == ["draft replied: draft text"]
    text, shown = render_records(records, token_budget=10_000)
    assert shown == 2
    assert "### Example 1" in text
    assert "Expected answer: 3" in text
    assert f"Input: {QUESTION}" in text
    hidden = build_records("solve", examples, results, excerpt_chars=200, show_expected=False)
    assert all(record.expected is None for record in hidden)


def test_a_run_without_calls_of_the_component_shows_its_trace() -> None:
    example = Example(id="e1", input={"question": QUESTION}, expected=46)
    run = ExampleResult(
        candidate_id="c",
        example_id="e1",
        score=0.0,
        feedback="wrong",
        trace="chat: user asked …; tool calculator(65-19) -> 46; reply: 45",
    )
    (record,) = build_records("agent", [example], [run], excerpt_chars=200, show_expected=True)
    assert record.trace == ["trace: chat: user asked …; tool calculator(65-19) -> 46; reply: 45"]
    assert "see the trace" in record.reply
    (bare,) = build_records(
        "agent",
        [example],
        [run.model_copy(update={"trace": ""})],
        excerpt_chars=200,
        show_expected=True,
    )
    assert bare.reply == "(this component was not used on this input)"


def test_records_are_cut_to_the_token_budget_but_never_empty() -> None:
    examples = [Example(id=f"e{i}", input={"question": QUESTION}, expected=1) for i in range(5)]
    results = [result(f"e{i}", 0.0, "x" * 400, "wrong") for i in range(5)]
    records = build_records("solve", examples, results, excerpt_chars=500, show_expected=True)
    _, shown = render_records(records, token_budget=300)
    assert 1 <= shown < 5
    _, one = render_records(records, token_budget=1)
    assert one == 1


def test_excerpt_keeps_the_start_and_more_of_the_end() -> None:
    text = "START " + "middle " * 100 + "Answer: \\boxed{7}"
    cut = excerpt(text, 90)
    assert len(cut) <= 90
    assert cut.startswith("START")
    assert cut.endswith("\\boxed{7}")
    assert excerpt("short", 90) == "short"


def test_shipped_prompt_renders_instruction_examples_task_and_placeholders() -> None:
    template = load_prompt()
    messages = reflection_messages(
        template,
        component="solve",
        instruction="Solve {question} now.",
        examples="### Example 1\nInput: q",
        task="Word problems.",
    )
    content = messages[0]["content"]
    assert "Solve {question} now." in content
    assert "### Example 1" in content
    assert "Word problems." in content
    assert "{question}" in placeholder_note("Solve {question} now.")
    assert placeholder_note("Solve it.") == ""


def test_custom_prompt_files_are_checked(tmp_path: Path) -> None:
    good = tmp_path / "good.md"
    good.write_text("Improve: {instruction}\n{examples}\nLiteral {{braces}}.")
    assert parse_settings("gepa", {"reflection_prompt": str(good)})
    missing = tmp_path / "missing.md"
    missing.write_text("Only {instruction}")
    with pytest.raises(ConfigError, match=r"must contain \{examples\}"):
        parse_settings("gepa", {"reflection_prompt": str(missing)})
    with pytest.raises(ConfigError, match="unknown placeholder"):
        check_prompt("{instruction} {examples} {nope}", "x.md")
    with pytest.raises(ConfigError, match="not found"):
        parse_settings("gepa", {"reflection_prompt": str(tmp_path / "absent.md")})


def test_retry_continues_the_chat_with_the_reason() -> None:
    first = [{"role": "user", "content": "prompt"}]
    chat = retry_messages(first, "Answer: 46", "an answer to an example", "Use {question}.")
    assert [m["role"] for m in chat] == ["user", "assistant", "user"]
    assert "an answer to an example" in chat[-1]["content"]
    assert "{question}" in chat[-1]["content"]


@pytest.mark.parametrize(
    "reply",
    [
        "Answer: 46",
        "Answer: The number of coins Jamal has left is \\(\\boxed{46}\\).",
        "The final answer is 46 coins.",
        "So Jamal has \\boxed{46} coins.",
    ],
)
def test_answers_are_not_instructions(reply: str) -> None:
    assert looks_like_answer(reply)
    _text, problem = parse_proposal(reply, "Answer the question.")
    assert problem is not None


@pytest.mark.parametrize(
    "reply",
    [
        "Solve the problem step by step. End with a line 'Answer: <number>'.",
        "```\nAnswer with the final line 'Answer: N' where N is a whole number.\n```",
        "Write your reasoning, then put the result as \\boxed{<number>} on the last line.",
    ],
)
def test_instructions_that_mention_the_format_are_accepted(reply: str) -> None:
    text, problem = parse_proposal(reply, "Answer the question.")
    assert problem is None, problem
    assert text is not None
    assert "```" not in text


def test_fenced_block_with_a_language_tag_is_extracted() -> None:
    text, problem = parse_proposal(
        "Sure!\n```fences\nSolve it step by step and end with 'Answer: <number>'.\n```\nDone.",
        "Answer the question.",
    )
    assert problem is None
    assert text == "Solve it step by step and end with 'Answer: <number>'."


def test_loops_copies_and_broken_placeholders_are_rejected() -> None:
    loop = "\n".join(["1. Calculate the total number of cookies Lena has now."] * 4)
    assert repeats_itself(loop)
    assert parse_proposal(loop, "Answer.")[1] == "repeats the same line over and over"
    copy = f"Input: {QUESTION} Reply: subtract to get the answer, then write it."
    assert copied_input(copy, [QUESTION]) is not None
    assert "copies" in str(parse_proposal(copy, "Answer.", example_inputs=[QUESTION])[1])
    assert (
        parse_proposal(copy, "Answer.", example_inputs=[QUESTION], reject_copies=False)[1] is None
    )
    # a dropped placeholder is put back with the original's sentence that held it
    restored = parse_proposal("Solve the problem carefully please.", "Solve {question}.")
    assert restored == ("Solve the problem carefully please.\nSolve {question}.", None)
    assert parse_proposal("", "x")[1] == "the reply is empty"
    assert parse_proposal("Answer the question.", "Answer the question.")[1] == "unchanged"


def test_compact_problems_hide_numbers_and_long_quotes_and_skip_successes() -> None:
    examples = [
        Example(id="e1", input={"question": QUESTION}, expected=46),
        Example(id="e2", input={"question": QUESTION + " Twice?"}, expected=92),
        Example(id="e3", input={"question": "Other?"}, expected=3),
    ]
    parse_failure = (
        "The run failed: stage 'solve': the reply must match the pattern 'Answer: (\\d+)'"
        " but was 'To determine how many coins Jamal has left, we need to subtract the …'"
    )
    results = [
        result("e1", 0.0, "…so Jamal has \\boxed{46} coins.", parse_failure),
        result("e2", 0.0, "…so Jamal has \\boxed{46} coins.", parse_failure),
        result("e3", 1.0, "Answer: 3", "Correct: 3."),
    ]
    records = build_records("solve", examples, results, excerpt_chars=500, show_expected=False)
    text, covered = render_compact(records, token_budget=1000, mask=True)
    assert covered == 2
    assert text.count("\n") == 0  # the two identical problems are shown once
    assert "46" not in text
    assert "<n>" in text
    assert "To determine" not in text
    assert "but was" not in text
    assert "The run failed" not in text
    assert 'The reply ended with: "…' in text
    assert 'has \\boxed{<n>} coins."' in text
    plain, _ = render_compact(records, token_budget=1000, mask=False)
    assert "\\boxed{46}" in plain


def test_compact_replies_are_joined_from_their_labelled_lines() -> None:
    reply = (
        "Sure!\n**TASK:** Solve arithmetic word problems.\n"
        "METHOD: <one or two sentences: Work step by step and check each operation>\n"
        "FORMAT: End with the line Answer: <number>\nThanks."
    )
    assert parse_compact(reply) == (
        "Solve arithmetic word problems. Work step by step and check each operation."
        "\nReply format: End with the line Answer: <number>"
    )
    assert parse_compact("TASK: only one line") == "only one line."
    assert parse_compact("Just an instruction.") is None
    assert parse_compact("TASK: x y z\nMETHOD:\nFORMAT: say it") == "x y z.\nReply format: say it"
    steps = parse_compact("TASK: Do it.\nMETHOD: Follow these steps:\n1. Read.\n2. Add.\nFORMAT: N")
    assert steps == "Do it. Follow these steps: 1. Read. 2. Add.\nReply format: N"
    assert parse_compact("TASK: Do it.\nMETHOD: Carefully.") == "Do it. Carefully."


def test_the_compact_prompt_asks_for_labelled_lines() -> None:
    template = load_prompt(style="compact")
    content = reflection_messages(
        template, component="solve", instruction="Answer.", examples="- bad", task="T."
    )[0]["content"]
    assert all(label in content for label in ("TASK:", "METHOD:", "FORMAT:"))
    assert '"Answer."' in content
    retry = retry_messages([{"role": "user", "content": content}], "x", "why", "Answer.", "compact")
    assert retry == [{"role": "user", "content": content}]


def test_a_compact_reply_that_drops_a_placeholder_gets_it_back() -> None:
    from emery.algorithms.gepa.reflection_proposer import ReflectionProposer
    from emery.algorithms.gepa.settings import GepaSettings

    current = "Classify the request into one of: {labels}. Reply with the label only."
    reply = "TASK: Pick the intent that fits the request.\nFORMAT: the label alone"
    text, problem = ReflectionProposer(GepaSettings()).parse("compact", reply, current, [])
    assert problem is None
    assert text == (
        "Pick the intent that fits the request.\nReply format: the label alone"
        "\nClassify the request into one of: {labels}."
    )
