"""The offline model catalog: assemble package files into a verified model file."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from emery.core.errors import ConfigError, EmeryError, ModelNotInstalledError
from emery.lm import catalog
from emery.lm.catalog import KnownModel, PackageFile

PARTS = [b"GGUF-part-one:" + bytes(range(256)), b"part-two:" + b"\x00\xff" * 300]
CONTENT = b"".join(PARTS)
PACKAGE = "emery_test_weights_pkg"


@pytest.fixture
def model_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "models"
    monkeypatch.setenv("EMERY_MODEL_DIR", str(directory))
    return directory


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed 'package' holding the model's parts as data files."""
    root = tmp_path / "site"
    pkg = root / PACKAGE
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for i, part in enumerate(PARTS, start=1):
        (pkg / "data" / f"part0{i}.bin").write_bytes(part)
    monkeypatch.syspath_prepend(str(root))
    return pkg


def _known(sha256: str | None = None, *, module: str = PACKAGE) -> KnownModel:
    return KnownModel(
        name="tiny-test",
        description="a test model",
        filename="tiny-test.gguf",
        size=len(CONTENT),
        sha256=sha256 or hashlib.sha256(CONTENT).hexdigest(),
        parts=[
            PackageFile(
                package="emery-test-weights",
                version="1.0",
                module=module,
                path=f"data/part0{i}.bin",
            )
            for i in range(1, len(PARTS) + 1)
        ],
    )


@pytest.fixture
def known(monkeypatch: pytest.MonkeyPatch) -> KnownModel:
    model = _known()
    monkeypatch.setattr(catalog, "KNOWN_MODELS", {model.name: model})
    return model


def test_model_dir_follows_the_environment(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert catalog.model_dir() == model_dir
    monkeypatch.delenv("EMERY_MODEL_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert catalog.model_dir() == tmp_path / "xdg" / "emery" / "models"


def test_package_file_locates_without_importing(package: Path) -> None:
    part = _known().parts[0]
    assert part.locate() == package / "data" / "part01.bin"
    assert part.requirement == "emery-test-weights==1.0"
    missing = PackageFile(package="x", version="1", module="emery_no_such_pkg_xyz", path="a.bin")
    assert missing.locate() is None


def test_pull_assembles_and_verifies(model_dir: Path, package: Path, known: KnownModel) -> None:
    assert not catalog.status(known).installed
    path = catalog.pull(known.name, install_packages=False)
    assert path == model_dir / known.filename
    assert path.read_bytes() == CONTENT
    status = catalog.status(known)
    assert status.installed
    assert status.path == str(path)
    assert status.size == len(CONTENT)
    assert catalog.installed_path(known.name) == path
    # A second pull finds the verified file and changes nothing.
    mtime = path.stat().st_mtime_ns
    assert catalog.pull(known.name, install_packages=False) == path
    assert path.stat().st_mtime_ns == mtime


def test_tampered_file_is_not_installed(model_dir: Path, package: Path, known: KnownModel) -> None:
    path = catalog.pull(known.name, install_packages=False)
    with path.open("ab") as handle:
        handle.write(b"!")
    assert not catalog.status(known).installed
    with pytest.raises(ModelNotInstalledError, match=r"emery models pull tiny-test"):
        catalog.installed_path(known.name)


def test_file_without_marker_is_not_installed(
    model_dir: Path, package: Path, known: KnownModel
) -> None:
    model_dir.mkdir(parents=True)
    (model_dir / known.filename).write_bytes(CONTENT)
    assert not catalog.status(known).installed
    with pytest.raises(ModelNotInstalledError, match="emery models pull"):
        catalog.installed_path(known.name)


def test_not_pulled_model_names_the_pull_command(model_dir: Path, known: KnownModel) -> None:
    with pytest.raises(ModelNotInstalledError) as info:
        catalog.installed_path(known.name)
    assert "emery models pull tiny-test" in str(info.value)


def test_wrong_sha256_installs_nothing(
    model_dir: Path, package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _known(sha256="0" * 64)
    monkeypatch.setattr(catalog, "KNOWN_MODELS", {model.name: model})
    with pytest.raises(EmeryError, match="does not match"):
        catalog.pull(model.name, install_packages=False)
    assert not (model_dir / model.filename).exists()
    assert list(model_dir.iterdir()) == []


def test_missing_package_without_install_is_reported(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _known(module="emery_no_such_pkg_xyz")
    monkeypatch.setattr(catalog, "KNOWN_MODELS", {model.name: model})
    with pytest.raises(ModelNotInstalledError, match=r"emery-test-weights==1\.0"):
        catalog.pull(model.name, install_packages=False)


def test_unknown_model_lists_known_ones(known: KnownModel) -> None:
    with pytest.raises(ConfigError, match="tiny-test") as info:
        catalog.known_model("nope")
    assert "'nope'" in str(info.value)
    with pytest.raises(ConfigError):
        catalog.pull("nope", install_packages=False)


def test_builtin_catalog_names() -> None:
    assert {"smollm2-135m", "qwen2.5-coder-0.5b"} <= set(catalog.KNOWN_MODELS)
    qwen = catalog.KNOWN_MODELS["qwen2.5-coder-0.5b"]
    assert len(qwen.parts) == 6
    assert all(len(model.sha256) == 64 for model in catalog.KNOWN_MODELS.values())
