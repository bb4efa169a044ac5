"""A file task in a temporary directory per episode: list, read and search files."""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from emery.systems.harness.observation import Observation

ANIMALS = ["heron", "otter", "lynx", "marten", "ibis", "newt", "vole", "wren", "stoat"]
WORDS = ["river", "stone", "cloud", "field", "lamp", "road", "paper", "glass", "salt", "bell"]
MAX_READ = 4000
TOOLS = [
    {"name": "list_files", "description": "Every file path.", "parameters": {}},
    {"name": "read_file", "description": "A file's text.", "parameters": {"path": "a path"}},
    {
        "name": "search",
        "description": "The paths of files containing a text.",
        "parameters": {"text": "text to find"},
    },
]


class FilesEnv:
    """Tools over the task's ``files`` written to a fresh temporary directory; paths
    outside it are refused."""

    tools = TOOLS

    def __init__(self) -> None:
        self.root: Path | None = None

    def reset(self, task: Mapping[str, Any]) -> str:
        self.close()
        self.root = Path(tempfile.mkdtemp(prefix="emery-files-"))
        for name, text in dict(task["files"]).items():
            path = self._inside(str(name))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(text), encoding="utf-8")
        return str(task["question"])

    def _inside(self, name: str) -> Path:
        assert self.root is not None
        path = (self.root / name).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ValueError(f"{name!r} is outside the task's directory")
        return path

    def _paths(self) -> list[str]:
        assert self.root is not None
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file())

    def execute(self, action: Mapping[str, Any]) -> Observation:
        arguments = action.get("arguments") or {}
        tool = action["tool"]
        if tool == "list_files":
            return Observation("\n".join(self._paths()))
        if tool == "search":
            text = str(arguments.get("text", ""))
            assert self.root is not None
            found = [p for p in self._paths() if text in (self.root / p).read_text("utf-8")]
            return Observation("\n".join(found) or f"no file contains {text!r}")
        try:
            path = self._inside(str(arguments.get("path", "")))
            return Observation(path.read_text(encoding="utf-8")[:MAX_READ])
        except (OSError, ValueError) as exc:
            return Observation(str(exc), ok=False)

    def close(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    @staticmethod
    def generate(rng: random.Random) -> tuple[dict[str, Any], Any]:
        """A few notes; one of them records a count of an animal, which is the answer."""
        animal = rng.choice(ANIMALS)
        count = rng.randint(2, 60)
        files: dict[str, str] = {}
        for index in range(rng.randint(3, 6)):
            words = " ".join(rng.choice(WORDS) for _ in range(12))
            files[f"notes/day{index + 1}.txt"] = f"Walk notes. {words}."
        target = rng.choice(sorted(files))
        files[target] += f"\nCounted {count} {animal}s by the water."
        question = f"How many {animal}s were counted? The answer is in one of the files."
        return {"question": question, "files": files}, str(count)
