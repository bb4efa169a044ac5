"""Models pulled from the Hugging Face Hub: ``emery models pull <owner>/<repo>/<file>.gguf``
downloads with ``huggingface_hub`` from a fake Hub on 127.0.0.1 that speaks its download
protocol (HEAD and GET ``/<repo>/resolve/<revision>/<file>``), and ``local/<name>`` then
resolves offline from the model directory."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest
from test_cli import assert_one_line_error, run_cli

from emery.core.errors import ConfigError, EmeryError, ModelNotInstalledError
from emery.lm import hub
from emery.lm.config import local_model_path

REPO = "emery-test/Tiny-Instruct-GGUF"
FILE = "tiny-instruct-q4_k_m.gguf"
NAME = f"{REPO}/{FILE}"
CONTENT = b"GGUF\x03\x00\x00\x00" + bytes(range(256)) * 40
SHA256 = hashlib.sha256(CONTENT).hexdigest()
COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub(ThreadingHTTPServer):
    """Serves ``files`` at ``main`` and at ``COMMIT``, and records each request."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files: dict[str, bytes] = {NAME: CONTENT}
        self.requests: list[tuple[str, str]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FakeHub

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(self, *, body: bool) -> None:
        self.server.requests.append((self.command, self.path))
        parts = unquote(self.path.split("?")[0]).split("/")[1:]
        if len(parts) < 5 or parts[2] != "resolve":
            self.send_error(404)
            return
        owner, repo, _, revision, *path = parts
        content = self.server.files.get(f"{owner}/{repo}/{'/'.join(path)}")
        if revision not in ("main", COMMIT) or content is None:
            code = "RevisionNotFound" if revision not in ("main", COMMIT) else "EntryNotFound"
            self.send_response(404)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", f"{code} on the fake Hub")
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{hashlib.sha256(content).hexdigest()}"')
        self.send_header("Content-Length", str(len(content)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if body:
            self.wfile.write(content)


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """The fake Hub as ``$HF_ENDPOINT``, with the library's files (cache, token, registry of
    agent harnesses it fetches from the endpoint) inside tmp_path."""
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf-token"))
    harnesses = tmp_path / "hf-harnesses.json"  # fresh: the library fetches no registry
    harnesses.write_text(json.dumps({"standardEnvVars": [], "harnesses": {}}))
    monkeypatch.setattr(constants, "AGENT_HARNESSES_PATH", str(harnesses), raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    server = FakeHub()
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", server.url)  # emery passes it to the library
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(autouse=True)
def model_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty model directory, and a scratch working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EMERY_MODEL_DIR", str(tmp_path / "models"))
    return tmp_path / "models"


def files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_pull_with_the_right_sha256_installs_and_resolves_offline(
    fake_hub: FakeHub, model_dir: Path
) -> None:
    result = hub.pull(NAME, revision=COMMIT, sha256=SHA256.upper())
    path = model_dir / "hub" / REPO / FILE
    assert result.downloaded
    assert result.model.path == str(path)
    assert (result.model.revision, result.model.sha256) == (COMMIT, SHA256)
    assert path.read_bytes() == CONTENT
    assert files_under(model_dir) == [f"hub/{NAME}", f"hub/{NAME}.verified"]  # no staging left
    marker = json.loads((path.parent / f"{FILE}.verified").read_text())
    assert (marker["repo_id"], marker["revision"]) == (REPO, COMMIT)

    fake_hub.shutdown()  # offline from here on: a request would be refused
    fake_hub.server_close()
    assert local_model_path(NAME) == path
    assert hub.pull(NAME, revision=COMMIT, sha256=SHA256).downloaded is False


def test_pull_without_pins_resolves_main_and_records_its_commit(
    fake_hub: FakeHub, model_dir: Path
) -> None:
    result = hub.pull(NAME)
    assert (result.model.revision, result.model.sha256) == (COMMIT, SHA256)
    assert ("HEAD", f"/{REPO}/resolve/main/{FILE}") in fake_hub.requests
    assert ("GET", f"/{REPO}/resolve/{COMMIT}/{FILE}") in fake_hub.requests
    assert local_model_path(NAME) == model_dir / "hub" / REPO / FILE


def test_wrong_sha256_deletes_the_download(fake_hub: FakeHub, model_dir: Path) -> None:
    with pytest.raises(EmeryError) as info:
        hub.pull(NAME, revision=COMMIT, sha256="0" * 64)
    message = str(info.value)
    assert "\n" not in message
    assert f"sha256 {SHA256} does not match the pinned {'0' * 64}" in message
    assert files_under(model_dir) == []
    with pytest.raises(ModelNotInstalledError):
        local_model_path(NAME)


def test_wrong_sha256_keeps_the_installed_file(fake_hub: FakeHub, model_dir: Path) -> None:
    path = hub.pull(NAME, revision=COMMIT, sha256=SHA256).model.path
    fake_hub.files[NAME] = CONTENT + b"changed upstream"
    with pytest.raises(EmeryError, match="does not match"):
        hub.pull(NAME, revision="main", sha256="1" * 64)
    assert local_model_path(NAME) == Path(path)
    assert Path(path).read_bytes() == CONTENT


def test_unpulled_name_names_the_pull_command(model_dir: Path) -> None:
    with pytest.raises(ModelNotInstalledError) as info:
        local_model_path(NAME)
    assert str(info.value) == (
        f"model local/{NAME} is neither a file nor a pulled Hub model: run"
        f" `emery models pull {NAME} --revision <commit> --sha256 <sha256>`"
    )


def test_changed_file_is_not_loaded_and_the_fix_has_its_pins(
    fake_hub: FakeHub, model_dir: Path
) -> None:
    path = Path(hub.pull(NAME, revision=COMMIT, sha256=SHA256).model.path)
    with path.open("ab") as handle:
        handle.write(b"!")
    with pytest.raises(ModelNotInstalledError) as info:
        local_model_path(NAME)
    assert f"emery models pull {NAME} --revision {COMMIT} --sha256 {SHA256}" in str(info.value)
    assert [m.installed for m in hub.list_pulled()] == [False]
    assert hub.pull(NAME, revision=COMMIT, sha256=SHA256).downloaded  # a pull repairs it
    assert local_model_path(NAME) == path


def test_a_file_at_the_path_comes_first(model_dir: Path, tmp_path: Path) -> None:
    local = tmp_path / REPO / FILE
    local.parent.mkdir(parents=True)
    local.write_bytes(b"a file of the user's")
    assert local_model_path(NAME) == Path(NAME)
    absolute = tmp_path / "elsewhere" / "x.gguf"
    with pytest.raises(ConfigError, match="model file not found"):
        local_model_path(str(absolute))
    with pytest.raises(ConfigError, match="model file not found"):
        local_model_path("one/x.gguf")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (NAME, (REPO, FILE)),
        ("o/r/sub/dir/m.gguf", ("o/r", "sub/dir/m.gguf")),
        ("o/m.gguf", None),
        ("o/r/m.safetensors", None),
        ("/abs/r/m.gguf", None),
        ("~/r/m.gguf", None),
        ("./r/m.gguf", None),
        ("o/../m.gguf", None),
        ("o/r/../m.gguf", None),
        ("o--x/r/m.gguf", None),
        ("o/r//m.gguf", None),
    ],
)
def test_hub_names(name: str, expected: tuple[str, str] | None) -> None:
    found = hub.hub_file(name)
    assert (None if found is None else (found.repo_id, found.filename)) == expected


def test_unknown_file_and_revision_are_one_line_errors(fake_hub: FakeHub, model_dir: Path) -> None:
    with pytest.raises(EmeryError) as info:
        hub.pull(f"{REPO}/missing.gguf", revision=COMMIT)
    assert str(info.value) == (
        f"pulling {REPO}/missing.gguf from the Hub failed:"
        f" {REPO} has no file 'missing.gguf' at {COMMIT}"
    )
    with pytest.raises(EmeryError) as info:
        hub.pull(NAME, revision="v9")
    assert str(info.value) == f"pulling {NAME} from the Hub failed: {REPO} has no revision 'v9'"
    assert files_under(model_dir) == []


def test_an_unreachable_hub_is_one_line(
    fake_hub: FakeHub, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The library retries a refused connection for about 20 s, then raises this.
    errors = pytest.importorskip("huggingface_hub.errors")

    def unreachable(*args: object, **kwargs: object) -> str:
        raise errors.LocalEntryNotFoundError("An error happened...\nPlease check your connection")

    monkeypatch.setattr("huggingface_hub.hf_hub_download", unreachable)
    with pytest.raises(EmeryError) as info:
        hub.pull(NAME, revision=COMMIT, sha256=SHA256)
    assert str(info.value) == (
        f"pulling {NAME} from the Hub failed: cannot reach {fake_hub.url}"
        " (check the connection, $HF_ENDPOINT and $HF_HUB_OFFLINE)"
    )
    assert files_under(model_dir) == []


def test_bad_sha256_is_refused_before_any_download(fake_hub: FakeHub) -> None:
    with pytest.raises(ConfigError, match="64 hex digits"):
        hub.pull(NAME, revision=COMMIT, sha256="abc")
    assert fake_hub.requests == []


def test_cli_pull_then_list(
    fake_hub: FakeHub, model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["models", "pull", f"local/{NAME}", "--revision", COMMIT, "--sha256", SHA256]
    assert run_cli(args) == 0
    captured = capsys.readouterr()
    assert f"local/{NAME} installed and verified" in captured.out
    assert "warning" not in captured.err

    assert run_cli(["models", "list", "--json"]) == 0
    listed = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert listed[NAME]["kind"] == "hub"
    assert listed[NAME]["installed"] is True
    assert listed[NAME]["revision"] == COMMIT
    assert listed[NAME]["sha256"] == SHA256
    assert "smollm2-135m" in listed  # the packaged catalog is still listed

    assert run_cli(["models", "list"]) == 0
    table = capsys.readouterr().out
    assert f"local/{NAME}" in table
    assert f"{REPO} at {COMMIT[:12]}" in table


def test_cli_pull_without_pins_prints_them(
    fake_hub: FakeHub, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["models", "pull", NAME]) == 0
    warning = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warning == [
        f"warning: local/{NAME} is not pinned; to get exactly this file again, run"
        f" `emery models pull {NAME} --revision {COMMIT} --sha256 {SHA256}`"
    ]


def test_cli_wrong_sha256(
    fake_hub: FakeHub, model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["models", "pull", NAME, "--revision", COMMIT, "--sha256", "f" * 64]) == 2
    assert_one_line_error(capsys.readouterr().err, "does not match the pinned", "deleted")
    assert files_under(model_dir) == []


def test_cli_unpulled_model_in_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["eval", "--task", "intent", "--model", f"local/{NAME}", "--limit", "1"]
    assert run_cli(args) == 2
    assert_one_line_error(
        capsys.readouterr().err,
        f"emery models pull {NAME} --revision <commit> --sha256 <sha256>",
    )


def test_cli_pins_are_for_hub_files_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["models", "pull", "smollm2-135m", "--sha256", SHA256]) == 2
    assert_one_line_error(capsys.readouterr().err, "--revision and --sha256 are for Hub files")
    assert run_cli(["models", "pull", "someone/model.gguf"]) == 2
    assert_one_line_error(capsys.readouterr().err, "<owner>/<repo>/<file>.gguf")
