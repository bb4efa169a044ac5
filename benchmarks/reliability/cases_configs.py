"""Corpus cases: configs that cannot be read, parsed or validated, and models that are
not models."""

from __future__ import annotations

from cases import PROGRAM, TASK, Case, job, train


def _models() -> list[Case]:
    def model(name: str, expect: str, spec: str) -> Case:
        return train(f"model: {name}", expect, job(model=spec))

    return [
        model("unknown provider", "provider", "acme/model-1"),
        model("unknown local model", "unknown local model", "local/nope-9b"),
        model("local model not pulled", "emery models pull", "local/smollm2-135m"),
        model("python, no module", "cannot import module", "python/nomod:lm"),
        model("python, no attribute", "has no attribute", "python/scripted_lm:nothing"),
        model("python, an int", "is not an lm", "python/scripted_lm:NOT_AN_LM"),
        model(
            "python, factory needs args",
            "positional argument",
            "python/scripted_lm:needs_arguments",
        ),
        model("python, factory raises", "the factory broke", "python/scripted_lm:broken_factory"),
        model("python, sync complete", "async .complete", "python/scripted_lm:SYNC_LM"),
        model("python, import fails", "failed: runtimeerror", "python/raises_on_import:lm"),
        model("python, no colon", "module:attribute", "python/scripted_lm"),
        model("provider of your own, no module", "cannot import module", "nomod:PROVIDER/m"),
        train(
            "model: reflection's provider not a provider",
            "'json:dumps' is a function; expected providerkind",
            job(extra='[lm.reflection]\nmodel = "json:dumps/m"\n') + PROGRAM,
        ),
        train(
            "model: openai base_url not a URL",
            "base_url",
            job(model="openai/gpt-x", lm='base_url = "ftp:/x"'),
        ),
        train("model: temperature a string", "temperature", job(lm='temperature = "hot"')),
    ]


def config_cases() -> list[Case]:
    """Configs a user can get wrong."""
    return [
        train("config not UTF-8", "not utf-8", b'[dataset]\ntask = "x\xff"\n'),
        train("JSON config not UTF-8", "not utf-8", b'{"dataset": "\xfe"}', "job.json"),
        train("invalid TOML", "invalid toml", "[dataset\n"),
        train("invalid JSON", "invalid json", "{", "job.json"),
        train("JSON config an array", "table/object", "[]", "job.json"),
        train("JSON nested too deeply", "nested too deeply", "[" * 100_000, "job.json"),
        train("empty config", "dataset", ""),
        train("YAML config", "invalid toml", "dataset:\n  task: x\n", "job.yaml"),
        train("unknown top-level key", "unknown key 'datset'", '[datset]\ntask = "x"\n'),
        train("unknown dataset key", "n_trian", job(TASK + "\nn_trian = 2")),
        train("n_test not a number", "n_test", job('task = "word_problems"\nn_test = "ten"')),
        train("negative n_test", "n_test", job('task = "word_problems"\nn_test = -3')),
        train("unknown task", "chess", job('task = "chess"')),
        train("no dataset", "dataset", '[lm.task]\nmodel = "python/scripted_lm:answer_lm"\n'),
        train("task and path", "dataset", job(TASK + '\npath = "d.jsonl"')),
        train("unknown algorithm", "algorithm", job(extra='[algorithm]\nname = "magic"\n')),
        train("concurrency zero", "concurrency", job(extra="concurrency = 0\n")),
        train("unknown runtime key", "unknown key", job(extra="threads = 4\n")),
        train("negative budget", "budget", job(extra="[budget]\nmax_metric_calls = -5\n")),
        train("unknown verifier", "verifier", job(extra='[verifier]\nkind = "vibes"\n')),
        train(
            "python verifier missing",
            "cannot import module",
            job(extra='[verifier]\nkind = "python"\nfunction = "nomod:score"\n'),
        ),
        train("unknown system kind", "unknown kind", job(extra='[system]\nkind = "robot"\n')),
        train("workdir is a file", "runtime.workdir", job(), work="a file, not a folder"),
        Case("config is a folder", ["train", "folder.toml"], "not found", {"folder.toml/x": ""}),
        Case("config missing", ["train", "missing.toml"], "not found"),
        Case(
            "config unreadable",
            ["train", "job.toml"],
            "not readable",
            {"job.toml": job()},
            {"job.toml": 0},
        ),
        *_models(),
    ]
