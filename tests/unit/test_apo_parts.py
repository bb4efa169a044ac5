"""APO's pieces: train batches, beam bookkeeping, experiment write-ups, edit checks."""

from __future__ import annotations

from collections import Counter

import pytest

from emery.algorithms.apo.batches import ShuffledBatches
from emery.algorithms.apo.beam import contenders, round_parents, select_top, unique
from emery.algorithms.apo.edit import appended, edit_problem, take_prompt
from emery.algorithms.apo.experiments import build_experiments, clip
from emery.core.example_result import ExampleResult
from emery.core.models import Example
from emery.systems.base import ComponentCall

IDS = [f"e{i}" for i in range(7)]


@pytest.mark.parametrize("size", [1, 3, 4, 7])
def test_batches_never_repeat_inside_a_batch_and_cover_every_pass(size: int) -> None:
    stream = ShuffledBatches(IDS, seed=5)
    drawn: list[str] = []
    for _ in range(30):
        batch = stream.next(size)
        assert len(batch) == size
        assert len(set(batch)) == size
        drawn.extend(batch)
    # Each full pass over the split uses every example exactly once.
    for start in range(0, len(drawn) - len(IDS) + 1, len(IDS)):
        assert Counter(drawn[start : start + len(IDS)]) == Counter(IDS)


def test_batches_are_shuffled_per_pass_and_capped_at_the_split() -> None:
    stream = ShuffledBatches(IDS, seed=1)
    passes = [stream.next(7) for _ in range(4)]
    assert len({tuple(p) for p in passes}) > 1
    assert any(p != IDS for p in passes)
    assert len(stream.next(50)) == 7


def test_batches_resume_from_their_cursor() -> None:
    stream = ShuffledBatches(IDS, seed=3)
    stream.next(5)
    saved = stream.cursor.model_copy(deep=True)
    expected = [stream.next(3) for _ in range(6)]
    resumed = ShuffledBatches(IDS, seed=3, cursor=saved)
    assert [resumed.next(3) for _ in range(6)] == expected


def test_peek_does_not_move_the_cursor() -> None:
    stream = ShuffledBatches(IDS, seed=2)
    stream.next(6)
    peeked = stream.peek(4)
    assert stream.next(4) == peeked


def test_batches_reject_empty_or_repeated_ids() -> None:
    with pytest.raises(ValueError, match="empty"):
        ShuffledBatches([], seed=0)
    with pytest.raises(ValueError, match="unique"):
        ShuffledBatches(["a", "a"], seed=0)


def test_round_parents_repeat_a_small_beam() -> None:
    assert round_parents(["a"], 3) == ["a", "a", "a"]
    assert round_parents(["a", "b"], 3) == ["a", "b", "a"]
    assert round_parents(["a", "b", "c", "d"], 2) == ["a", "b"]
    with pytest.raises(ValueError, match="empty"):
        round_parents([], 2)


def test_select_top_keeps_the_best_and_breaks_ties_by_order() -> None:
    scores = {"a": 0.5, "b": 0.9, "c": 0.5, "d": 0.1, "e": 0.9}
    assert select_top(["a", "b", "c", "d", "e"], scores, 3) == ["b", "e", "a"]
    assert select_top(["c", "a"], scores, 1) == ["c"]
    assert select_top(["a", "d"], scores, 5) == ["a", "d"]
    assert unique(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]


def test_contenders_are_those_a_val_batch_cannot_tell_from_its_best() -> None:
    scores = {"a": 9 / 16, "b": 11 / 16, "c": 5 / 16, "d": 11 / 16}
    # 11 of 16 against 9 of 16 is within one standard error of the difference; 5 is not.
    assert contenders(["a", "b", "c", "d"], scores, 16, 4) == ["b", "d", "a"]
    assert contenders(["a", "b", "c", "d"], scores, 16, 2) == ["b", "d"]
    # Against a perfect score, one miss in 16 is already a difference.
    assert contenders(["x", "y"], {"x": 1.0, "y": 15 / 16}, 16, 4) == ["x"]
    assert contenders(["x", "y"], {"x": 0.0, "y": 0.0}, 16, 4) == ["x", "y"]


def test_experiments_show_status_conversation_and_feedback_failures_first() -> None:
    examples = [
        Example(id="x1", input={"question": "2+2?"}, expected=4),
        Example(id="x2", input={"question": "3+3?"}, expected=6),
        Example(id="x3", input={"question": "1+1?"}, expected=2),
    ]
    prompt = "Add the numbers."
    call = ComponentCall(
        component="solve",
        messages=[
            {"role": "system", "content": prompt},
            {"role": "user", "content": "2+2?"},
        ],
        reply="Answer: 4",
        output="4",
    )
    results = [
        ExampleResult(
            candidate_id="c",
            example_id="x1",
            output="4",
            score=1.0,
            feedback="Correct: 4.",
            calls=[call],
        ),
        ExampleResult(
            candidate_id="c",
            example_id="x2",
            score=0.0,
            error="stage 'solve': the reply must match",
            feedback="The run failed: stage 'solve': the reply must match",
            calls=[
                ComponentCall(
                    component="solve",
                    messages=[{"role": "user", "content": "3+3? " + "x" * 900}],
                    reply="six",
                    error="the reply must match",
                )
            ],
        ),
        ExampleResult(candidate_id="c", example_id="x3", score=0.0, error="TimeoutError: slow"),
    ]
    text = build_experiments(examples, results, component="solve", prompt=prompt, max_chars=100)
    blocks = text.split("\n\n")
    assert len(blocks) == 3
    assert blocks[0].startswith("Example 1: FAILED (the run ended in an error; score 0.00)")
    assert "3+3?" in blocks[0]
    assert "[reply] six" in blocks[0]
    assert blocks[0].splitlines()[1] == (
        "Checker: The run failed: stage 'solve': the reply must match"
    )
    assert "[error]" not in blocks[0]  # the checker already said it
    assert "…[cut]…" in blocks[0]
    assert "Expected: 6" in blocks[0]
    assert "Input: " in blocks[1]
    assert "Error: TimeoutError: slow" in blocks[1]
    assert blocks[2].startswith("Example 3: PASSED")
    assert "[system] (the prompt above)" in blocks[2]
    assert "Checker: Correct: 4." in blocks[2]
    assert "Output: 4" in blocks[2]


def test_experiments_label_steps_of_multi_component_runs() -> None:
    example = Example(id="x", input={"q": "hi"})
    result = ExampleResult(
        candidate_id="c",
        example_id="x",
        score=0.5,
        calls=[
            ComponentCall(component="draft", messages=[{"role": "user", "content": "hi"}]),
            ComponentCall(component="polish", messages=[{"role": "user", "content": "d"}]),
        ],
    )
    text = build_experiments([example], [result], component="polish", prompt="Polish.")
    assert "Example 1: WRONG (score 0.50)" in text
    assert "Step draft:" in text
    assert "Step polish:" in text
    assert "[reply] (empty)" in text
    with pytest.raises(ValueError, match="one result per example"):
        build_experiments([example], [], component="polish", prompt="Polish.")


def test_experiments_show_rollout_status_and_the_trace_the_calls_lack() -> None:
    example = Example(id="x", input={"q": "hi"})
    trace = (
        "1. LM call — user: hi → assistant: hello\n2. tool search({'q': 'hi'}) → 3 hits\n"
        "3. error: TimeoutError: slow"
    )
    with_calls = ExampleResult(
        candidate_id="c",
        example_id="x",
        error="TimeoutError: slow",
        rollout_status="timed_out",
        attempts=3,
        trace=trace,
        calls=[ComponentCall(component="p", messages=[{"role": "user", "content": "hi"}])],
    )
    text = build_experiments([example], [with_calls], component="p", prompt="P.")
    assert text.startswith("Example 1: FAILED (the run timed_out after 3 attempts; score 0.00)")
    assert "[trace] 2. tool search({'q': 'hi'}) → 3 hits" in text
    assert "LM call" not in text
    assert text.count("TimeoutError: slow") == 1

    agent = ExampleResult(candidate_id="c", example_id="x", score=1.0, trace=trace)
    text = build_experiments([example], [agent], component="p", prompt="P.")
    assert "[trace] 1. LM call — user: hi → assistant: hello" in text
    assert text.startswith("Example 1: PASSED")


def test_clip_marks_the_cut() -> None:
    assert clip("short", 50) == "short"
    clipped = clip("start " + "y" * 200 + " Answer: 7", 40)
    assert len(clipped) <= 40
    assert clipped.startswith("start y")
    assert "…[cut]…" in clipped
    assert clipped.endswith("Answer: 7")


@pytest.mark.parametrize(
    ("reply", "prompt"),
    [
        ("```\nSolve {question} step by step.\n```", "Solve {question} step by step."),
        ("New prompt: Solve it step by step.", "Solve it step by step."),
        ("**Improved prompt:** Solve it step by step.", "Solve it step by step."),
        ("<prompt>\nSolve it step by step.\n</prompt>", "Solve it step by step."),
        ("Here is the new prompt:\n\nSolve it step by step.", "Solve it step by step."),
        ('"Solve it step by step."', "Solve it step by step."),
        ("```Solve it step by step.```", "Solve it step by step."),
        ("```python\nSolve it step by step.\n```", "Solve it step by step."),
        ("Solve it step by step. ```", "Solve it step by step."),
        ("```\nSolve it step by step.", "Solve it step by step."),
        ("   ", None),
    ],
)
def test_take_prompt_strips_wrappers(reply: str, prompt: str | None) -> None:
    assert take_prompt(reply) == prompt


@pytest.mark.parametrize(
    ("proposal", "cut_off", "problem"),
    [
        ("Read {question} and answer it with care.", False, None),
        ("Read the question and answer it with care.", False, "dropped placeholder {question}"),
        ("Read {question} and {notes} with care.", False, "invented placeholder {notes}"),
        ("Read {question} and answer it with care.", True, "the reply was cut off"),
        ("Read {question}.\n[reply] It is 4.\nChecker: ok", False, "copies the material"),
        ("Read {question} and then answer.", False, "unchanged"),
        (None, False, "the reply holds no prompt"),
        ("What would you like to do next?", False, "dropped placeholder"),
    ],
)
def test_edit_problem(proposal: str | None, cut_off: bool, problem: str | None) -> None:
    found = edit_problem("Read {question} and then answer.", proposal, cut_off=cut_off)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(problem)


def test_edits_that_answer_a_train_example_are_rejected() -> None:
    examples = ['{"question": "Ben has 12 books and gets 5 more. How many books does Ben have?"}']
    original = "Answer the question."
    answer = "To find how many books Ben has now, add the books he got."
    assert edit_problem(original, answer, cut_off=False, examples=examples) == (
        "quotes the name 'Ben' from a train example: an answer, not a prompt"
    )
    sum_up = "Add 12 and 5 to get the total, then reply."
    assert edit_problem(original, sum_up, cut_off=False, examples=examples) == (
        "quotes the number '12' from a train example: an answer, not a prompt"
    )
    general = "Solve the problem step by step, then end with the line Answer: <number>."
    assert edit_problem(original, general, cut_off=False, examples=examples) is None
    # names and numbers the task description (or the old prompt) already uses are fine
    task = "Questions about Ben's 12 shelves."
    assert (
        edit_problem(
            original,
            "Count Ben's 12 shelves and reply.",
            cut_off=False,
            examples=examples,
            allowed=task,
        )
        is None
    )
    assert edit_problem(original, "What would you like to do next?", cut_off=False) == (
        "a question back, not an instruction"
    )
    assert (
        edit_problem(original, "Solve it. Is the answer whole? Then reply.", cut_off=False) is None
    )
    meta = "Answer the question. The instructions are incorrect."
    assert edit_problem(original, meta, cut_off=False) == (
        "talks about the prompt ('The instructions are') instead of instructing the assistant"
    )
    follow = "Follow the instructions below and end with Answer: <number>."
    assert edit_problem(original, follow, cut_off=False) is None
    lead_in = "Solve the problem. Here are the steps:"
    assert edit_problem(original, lead_in, cut_off=False) == (
        "ends with a colon: a lead-in to text that is missing"
    )


def test_an_empty_original_still_rejects_invented_placeholders() -> None:
    assert edit_problem("", "Use {question} well and reply.", cut_off=False) == (
        "invented placeholder {question}"
    )
    assert edit_problem("", "Think, then end with Answer: <n>.", cut_off=False) is None


def test_appended_joins_on_the_prompt_shape() -> None:
    assert appended("Solve it.", " Be brief. ") == "Solve it. Be brief."
    assert appended("Solve it.\nShow work.\n", "Be brief.") == "Solve it.\nShow work.\nBe brief."
    assert appended("  ", "Be brief.") == "Be brief."
