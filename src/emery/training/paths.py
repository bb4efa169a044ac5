"""Where a training job's files live: the folder its relative paths are under, and its run
folder (checkpoints and the peft adapter)."""

from __future__ import annotations

from pathlib import Path

from emery.config.schema import JobConfig


def job_base_dir(config_path: Path | None, base_dir: Path | None = None) -> Path:
    """The folder a job's relative paths are under: ``base_dir`` when given, else the
    config file's folder, else the working folder."""
    return (base_dir or (config_path.parent if config_path else Path.cwd())).resolve()


def run_dir(base_dir: Path, config: JobConfig, job_id: str) -> Path:
    """Where a job's checkpoints and peft adapter live: ``<workdir>/<kind>/<job id>``."""
    workdir = Path(config.runtime.workdir)
    return (workdir if workdir.is_absolute() else base_dir / workdir) / config.job.type / job_id
