"""The bad-input corpus: configs, datasets and flags a user can get wrong. Each case must
end with one ``error:`` line, a non-zero exit and the store as it was."""

from __future__ import annotations

from dataclasses import dataclass, field

SCRIPTED = "python/scripted_lm:answer_lm"
TASK = 'task = "word_problems"\nn_train = 1\nn_val = 1\nn_test = 1'
PROGRAM = (
    '[system]\nkind = "prompt_program"\n[[system.stages]]\nname = "answer"\n'
    'instruction = "Answer."\nmessages = [{ role = "user", template = "{question}" }]\n'
)
Files = dict[str, str | bytes]


@dataclass(frozen=True)
class Case:
    """One bad input: ``emery ARGS`` run in a folder holding ``files`` (``{store}`` in an
    argument is the case's store); ``expect`` is a fragment of the error line (any case).
    ``modes``: file permissions to set; such a case needs an unprivileged user."""

    name: str
    args: list[str]
    expect: str
    files: Files = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)


def job(dataset: str = TASK, *, model: str = SCRIPTED, lm: str = "", extra: str = "") -> str:
    """A job config: ``dataset`` lines, the task model (plus ``lm`` lines), ``extra``."""
    return (
        f'[dataset]\n{dataset}\n\n[lm.task]\nmodel = "{model}"\n{lm}\n'
        f'[runtime]\nworkdir = "work"\n{extra}'
    )


def train(
    name: str, expect: str, text: str | bytes, config: str = "job.toml", **more: str | bytes
) -> Case:
    """``emery train CONFIG`` where CONFIG holds ``text`` (and ``more`` files beside it)."""
    return Case(name, ["train", config], expect, {config: text, **more})


def data(name: str, expect: str, file: str, content: str | bytes) -> Case:
    """``emery train`` on a prompt program over the dataset ``file`` holding ``content``."""
    return train(name, expect, job(f'path = "{file}"') + PROGRAM, **{file: content})


def all_cases() -> list[Case]:
    """Every case of the corpus."""
    from cases_agentrl import agentrl_cases
    from cases_approval import approval_cases
    from cases_cliinit import cliinit_cases
    from cases_configs import config_cases
    from cases_costfront import costfront_cases
    from cases_executor import executor_cases
    from cases_failaware import failaware_cases
    from cases_flags import dataset_cases, flag_cases
    from cases_fromtraces import fromtraces_cases
    from cases_graphcode import graphcode_cases
    from cases_inputs import inputs_cases
    from cases_judge import judge_cases
    from cases_leftovers import leftover_cases
    from cases_parallel import parallel_cases
    from cases_publish import publish_cases
    from cases_registry import registry_cases
    from cases_rolebudgets import rolebudgets_cases
    from cases_server import server_cases
    from cases_sftsample import sftsample_cases
    from cases_strategies import strategy_cases
    from cases_together import together_cases
    from cases_warmstart import warmstart_cases
    from cases_workers import workers_cases

    return [
        *config_cases(),
        *dataset_cases(),
        *flag_cases(),
        *graphcode_cases(),
        *inputs_cases(),
        *server_cases(),
        *workers_cases(),
        *cliinit_cases(),
        *registry_cases(),
        *executor_cases(),
        *parallel_cases(),
        *publish_cases(),
        *failaware_cases(),
        *strategy_cases(),
        *costfront_cases(),
        *rolebudgets_cases(),
        *warmstart_cases(),
        *fromtraces_cases(),
        *approval_cases(),
        *together_cases(),
        *agentrl_cases(),
        *sftsample_cases(),
        *judge_cases(),
        *leftover_cases(),
    ]
