"""Bad rejection-sampling settings of an SFT job (``[sft] samples_per_example``,
``sample_temperature``, ``teacher``; issue 35's "better together" SFT data). The case's
store holds one succeeded prompt job named ``seed`` (the built-in word-problems program);
each ends with one error line naming the setting and stores no job."""

from __future__ import annotations

from cases import Case, job, train

MODEL = "local/smollm2-135m"
"""Training tunes a local model (not pulled in a case's folder: the checks come first)."""


def _sft(settings: str, runtime: str = "") -> str:
    return job(model=MODEL, lm=runtime) + '\n[job]\ntype = "sft"\n\n[sft]\n' + settings + "\n"


def _sampling(settings: str) -> str:
    return _sft(f'source_job = "seed"\n{settings}')


def sftsample_cases() -> list[Case]:
    """Each sets the sampling keys of ``[sft]`` wrong."""
    return [
        train(
            "sft samples_per_example: negative",
            "samples_per_example",
            _sampling("samples_per_example = -1"),
        ),
        train(
            "sft samples_per_example: not a number",
            "samples_per_example",
            _sampling('samples_per_example = "many"'),
        ),
        train(
            "sft sample_temperature: above 2",
            "sample_temperature",
            _sampling("samples_per_example = 2\nsample_temperature = 5.0"),
        ),
        train(
            "sft sample_temperature: 0 with several samples",
            "sft.sample_temperature = 0 makes all 4 samples of an example the same",
            _sampling("samples_per_example = 4\nsample_temperature = 0.0"),
        ),
        train(
            "sft teacher: without samples",
            "sft.teacher samples replies: set sft.samples_per_example",
            _sampling('teacher = "local/qwen2.5-coder-0.5b"'),
        ),
        train(
            "sft teacher: not a model name",
            "sft.teacher: 'gpt-4o' must look like local/<name>",
            _sampling('samples_per_example = 2\nteacher = "gpt-4o"'),
        ),
        train(
            "sft teacher: unknown local model",
            "sft.teacher: unknown local model 'no-such-model'",
            _sampling('samples_per_example = 2\nteacher = "local/no-such-model"'),
        ),
        train(
            "sft teacher: not installed",
            "sft.teacher: model local/qwen2.5-coder-0.5b is not installed",
            _sampling('samples_per_example = 2\nteacher = "local/qwen2.5-coder-0.5b"'),
        ),
        train(
            "sft samples_per_example: with a data file",
            "sft.samples_per_example samples a prompt job's candidate: set sft.source_job",
            _sft('data = "chats.jsonl"\nsamples_per_example = 2'),
            **{
                "chats.jsonl": '{"messages": [{"role": "user", "content": "hi"}, '
                '{"role": "assistant", "content": "hello"}]}\n'
            },
        ),
        train(
            "sft samples_per_example: every candidate",
            'sft.samples_per_example samples one prompt: set sft.candidate to "best"',
            _sampling('samples_per_example = 2\ncandidate = "all"'),
        ),
        train(
            "sft samples_per_example: on runners",
            "sft.samples_per_example samples in the job's own process",
            _sampling("samples_per_example = 2").replace(
                "[runtime]\n", '[runtime]\nexecutor = "runners"\n'
            ),
        ),
    ]
