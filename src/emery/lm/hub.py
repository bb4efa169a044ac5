"""GGUF models pulled from the Hugging Face Hub: ``local/<owner>/<repo>/<file>.gguf``.

``emery models pull <owner>/<repo>/<file>.gguf --revision <commit> --sha256 <hex>`` downloads
one file of a Hub model repository with ``huggingface_hub`` (``$HF_ENDPOINT`` is honoured)
into ``<model dir>/hub/<owner>/<repo>/<file>``, checks its sha256, and writes a marker
beside it: the repository, file, commit, sha256, size and mtime. A config then names the
model ``local/<owner>/<repo>/<file>.gguf``, which resolves offline from the marker, without
importing ``huggingface_hub``; a file whose size or mtime differs from its marker is not
loaded. A file that does not match the pinned sha256 is deleted, never installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from emery.core.errors import ConfigError, EmeryError, ModelNotInstalledError
from emery.lm.catalog import model_dir

_SEGMENT = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?")
"""An owner or repository name as the Hub allows it (``[\\w.-]``, a word character at each end)."""
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
PLACEHOLDER_REVISION = "<commit>"
PLACEHOLDER_SHA256 = "<sha256>"


class HubFile(BaseModel):
    """One file of a Hub model repository: ``<owner>/<repo>`` and its path in the repo."""

    repo_id: str
    filename: str

    @property
    def name(self) -> str:
        """The name after ``local/`` in a config, and the argument of ``emery models pull``."""
        return f"{self.repo_id}/{self.filename}"

    def pull_command(self, revision: str | None = None, sha256: str | None = None) -> str:
        return (
            f"emery models pull {self.name} --revision {revision or PLACEHOLDER_REVISION}"
            f" --sha256 {sha256 or PLACEHOLDER_SHA256}"
        )


class HubModelStatus(BaseModel):
    """A pulled Hub model, as ``emery models list`` shows it."""

    name: str
    repo_id: str
    filename: str
    revision: str
    sha256: str
    installed: bool
    size: int
    path: str


class HubPull(BaseModel):
    """What ``pull`` did: the installed model, and whether it was downloaded now."""

    model: HubModelStatus
    downloaded: bool


def hub_file(name: str) -> HubFile | None:
    """``<owner>/<repo>/<path>.gguf`` as a ``HubFile``; None for any other name."""
    parts = name.split("/")
    if len(parts) < 3 or not name.endswith(".gguf") or "\\" in name:
        return None
    owner, repo, *path = parts
    for segment in (owner, repo):
        if not _SEGMENT.fullmatch(segment) or ".." in segment or "--" in segment:
            return None
    if any(part in ("", ".", "..") for part in path):
        return None
    return HubFile(repo_id=f"{owner}/{repo}", filename="/".join(path))


def parse_hub_file(name: str) -> HubFile:
    """``hub_file`` or a one-line error saying what a Hub model's name looks like."""
    found = hub_file(name)
    if found is None:
        raise ConfigError(
            f"{name!r} is not a Hub model: name one as <owner>/<repo>/<file>.gguf, e.g."
            " Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
        )
    return found


def hub_dir() -> Path:
    """Where pulled Hub models live: ``<model dir>/hub``."""
    return model_dir() / "hub"


def _target(ref: HubFile) -> Path:
    return hub_dir() / ref.repo_id / ref.filename


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _read_marker(path: Path) -> dict[str, Any] | None:
    try:
        recorded = json.loads(_marker(path).read_text())
    except (OSError, ValueError):
        return None
    return recorded if isinstance(recorded, dict) else None


def _verified(ref: HubFile, path: Path, recorded: dict[str, Any] | None) -> bool:
    if recorded is None or not path.is_file():
        return False
    stat = path.stat()
    return bool(
        recorded.get("repo_id") == ref.repo_id
        and recorded.get("filename") == ref.filename
        and _SHA256.fullmatch(str(recorded.get("sha256")))
        and recorded.get("size") == stat.st_size
        and recorded.get("mtime_ns") == stat.st_mtime_ns
    )


def _status(ref: HubFile, path: Path, recorded: dict[str, Any]) -> HubModelStatus:
    return HubModelStatus(
        name=ref.name,
        repo_id=ref.repo_id,
        filename=ref.filename,
        revision=str(recorded.get("revision", "")),
        sha256=str(recorded.get("sha256", "")),
        installed=_verified(ref, path, recorded),
        size=int(recorded.get("size") or 0),
        path=str(path),
    )


def installed_path(name: str) -> Path:
    """The verified file of a pulled Hub model (offline), or a one-line error naming the
    command that pulls it (with its pins, when an earlier pull recorded them)."""
    ref = parse_hub_file(name)
    path = _target(ref)
    recorded = _read_marker(path)
    if _verified(ref, path, recorded):
        return path
    pins = recorded or {}
    raise ModelNotInstalledError(
        f"model local/{name} is neither a file nor a pulled Hub model: run"
        f" `{ref.pull_command(pins.get('revision'), pins.get('sha256'))}`"
    )


def gguf_path(name: str) -> Path:
    """The file behind ``local/<name>.gguf``: the file at that path if there is one, else the
    pulled Hub model ``<owner>/<repo>/<file>.gguf`` of that name."""
    path = Path(name).expanduser()
    if path.is_file():
        return path
    if hub_file(name) is not None:
        return installed_path(name)
    raise ConfigError(f"model file not found: {path}")


def list_pulled() -> list[HubModelStatus]:
    """The pulled Hub models in ``hub_dir()``, by name (a changed file shows not installed)."""
    folder = hub_dir()
    found = []
    for marker in sorted(folder.rglob("*.gguf.verified")) if folder.is_dir() else []:
        path = marker.with_name(marker.name.removesuffix(".verified"))
        try:
            relative = path.relative_to(folder).as_posix()
        except ValueError:
            continue
        ref = hub_file(relative)
        recorded = _read_marker(path)
        if ref is None or recorded is None:
            continue
        found.append(_status(ref, path, recorded))
    return found


def is_commit(revision: str) -> bool:
    """Whether ``revision`` is a full commit hash (a branch or a tag can move)."""
    return _COMMIT.fullmatch(revision) is not None


def pull(
    name: str,
    *,
    revision: str | None = None,
    sha256: str | None = None,
    endpoint: str | None = None,
) -> HubPull:
    """Download ``<owner>/<repo>/<file>.gguf`` at ``revision`` (default ``main``), check its
    sha256 against ``sha256`` (when given) and install it with its marker.

    A verified file with the same pins is kept without a network call. A file whose digest
    differs is deleted and the one already installed, if any, stays."""
    ref = parse_hub_file(name)
    if sha256 is not None:
        sha256 = sha256.strip().lower()
        if not _SHA256.fullmatch(sha256):
            raise ConfigError(f"--sha256 must be 64 hex digits, not {sha256!r}")
    target = _target(ref)
    recorded = _read_marker(target)
    if (
        recorded is not None
        and _verified(ref, target, recorded)
        and sha256 in (None, recorded.get("sha256"))
        and revision in (None, recorded.get("revision"))
    ):
        return HubPull(model=_status(ref, target, recorded), downloaded=False)
    try:
        from huggingface_hub import hf_hub_download  # slow to import: only to download
    except ImportError:
        raise EmeryError(
            "pulling a Hub model needs huggingface_hub: pip install 'emery[local]'"
        ) from None
    endpoint = endpoint or os.environ.get("HF_ENDPOINT") or None
    hub_dir().mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".pull-", dir=hub_dir()))
    try:
        try:
            commit = revision if revision is not None and is_commit(revision) else None
            if commit is None:  # resolve the branch or tag first: the marker records a commit
                commit = hf_hub_download(
                    ref.repo_id,
                    ref.filename,
                    revision=revision,
                    local_dir=staging,
                    endpoint=endpoint,
                    dry_run=True,
                ).commit_hash
            downloaded = Path(
                hf_hub_download(
                    ref.repo_id, ref.filename, revision=commit, local_dir=staging, endpoint=endpoint
                )
            )
        except Exception as exc:  # the library's errors are many; each is one line here
            reason = _hub_error(exc, ref, revision, endpoint)
            raise EmeryError(f"pulling {ref.name} from the Hub failed: {reason}") from None
        digest = _sha256_of(downloaded)
        if sha256 is not None and digest != sha256:
            downloaded.unlink(missing_ok=True)
            raise EmeryError(
                f"{ref.name} at {commit}: sha256 {digest} does not match the pinned {sha256};"
                " the downloaded file was deleted"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        _marker(target).unlink(missing_ok=True)  # no marker ever vouches for a file mid-move
        os.replace(downloaded, target)
        stat = target.stat()
        recorded = {
            "repo_id": ref.repo_id,
            "filename": ref.filename,
            "revision": commit,
            "sha256": digest,
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
        }
        _marker(target).write_text(json.dumps(recorded))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return HubPull(model=_status(ref, target, recorded), downloaded=True)


def _hub_error(exc: Exception, ref: HubFile, revision: str | None, endpoint: str | None) -> str:
    """What went wrong, in one line: the library's messages run over several."""
    from huggingface_hub import errors

    if isinstance(exc, errors.GatedRepoError):
        return f"{ref.repo_id} is gated: accept its terms on the Hub and set $HF_TOKEN"
    if isinstance(exc, errors.RepositoryNotFoundError):
        return f"no repository {ref.repo_id} (a private one needs $HF_TOKEN)"
    if isinstance(exc, errors.RevisionNotFoundError):
        return f"{ref.repo_id} has no revision {revision!r}"
    if isinstance(exc, errors.RemoteEntryNotFoundError):
        return f"{ref.repo_id} has no file {ref.filename!r} at {revision or 'main'}"
    if isinstance(exc, errors.LocalEntryNotFoundError | errors.OfflineModeIsEnabled):
        where = endpoint or "https://huggingface.co"
        return f"cannot reach {where} (check the connection, $HF_ENDPOINT and $HF_HUB_OFFLINE)"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()
