"""The documentation site (``mkdocs.yml``) builds with ``--strict``: a broken link or
anchor, a page left out of the nav, a link that leaves the site, or an API reference entry
whose object is gone fails ``make test``.

The links between the README, ``docs/`` and the example and benchmark READMEs are written
as GitHub reads them; ``docs/hooks/repository_pages.py`` maps them into the site (tested
here directly, and through a small strict build that must fail).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
HOOKS = REPO / "docs" / "hooks" / "repository_pages.py"
QUIET = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def load_hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("repository_pages", HOOKS)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = load_hooks()
PAGES = hooks.repository_pages()


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=QUIET,
        timeout=120,
        check=False,
    )


@pytest.mark.slow  # a process: mkdocs build, about 3 s on two cores
def test_the_site_builds_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = build(REPO / "mkdocs.yml", site)
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line]
    assert done.returncode == 0, "\n".join(warnings) or done.stderr[-3000:]
    assert warnings == []
    sdk = (site / "reference" / "sdk" / "index.html").read_text(encoding="utf-8")
    assert 'id="emery.sdk.job.optimize"' in sdk  # generated from the docstrings
    assert 'id="emery.sdk.prompts.prompt"' in sdk
    examples = (site / "examples" / "index.html").read_text(encoding="utf-8")
    assert 'href="classification/"' in examples  # ../examples/classification/README.md
    assert (site / "examples" / "classification" / "index.html").is_file()
    home = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="prompts/#the-production-loop"' in home  # the README's docs/prompts.md#...


def test_every_page_under_docs_is_in_the_nav() -> None:
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    pages = [
        path.relative_to(REPO / "docs").as_posix()
        for path in (REPO / "docs").rglob("*.md")
        if "hooks" not in path.parts
    ]
    assert pages
    assert [page for page in pages if f" {page}\n" not in text] == []
    assert [page for page in PAGES.values() if f" {page}\n" not in text] == []


@pytest.mark.slow  # a process
def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """The validation settings of ``mkdocs.yml`` turn each of these into a warning, and
    ``--strict`` into a failed build."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(
        "# A\n\n[gone](gone.md), [no anchor](b.md#nowhere), [nav](#a)\n", encoding="utf-8"
    )
    (docs / "b.md").write_text("# B\n", encoding="utf-8")
    (docs / "c.md").write_text("# C, in no nav\n", encoding="utf-8")
    ours = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    validation = ours[ours.index("validation:") : ours.index("\nnav:")]
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        f"site_name: t\ndocs_dir: {docs}\nnav: [a.md, b.md]\n{validation}", encoding="utf-8"
    )
    done = build(config, tmp_path / "site")
    assert done.returncode != 0
    assert "'gone.md'" in done.stderr
    assert "does not contain an anchor '#nowhere'" in done.stderr
    assert 'not included in the "nav" configuration:\n  - c.md' in done.stderr


@pytest.mark.parametrize(
    ("target", "repo_path", "site_path", "expected"),
    [
        ("../examples/classification/README.md", "docs/examples.md", "examples.md",
         "examples/classification/README.md"),
        ("docs/prompts.md#the-production-loop", "README.md", "index.md",
         "prompts.md#the-production-loop"),
        ("examples/custom_algorithm", "README.md", "index.md",
         "examples/custom_algorithm/README.md"),
        ("../../docs/user-code.md", "examples/classification/README.md",
         "examples/classification/README.md", "../../user-code.md"),
        ("../plugins.md", "docs/reference/plugins.md", "reference/plugins.md", "../plugins.md"),
        ("https://example.com/x.md", "docs/a.md", "a.md", "https://example.com/x.md"),
        ("#anchor", "docs/a.md", "a.md", "#anchor"),
    ],
)  # fmt: skip
def test_links_are_mapped_into_the_site(
    target: str, repo_path: str, site_path: str, expected: str
) -> None:
    assert hooks.rewrite_link(target, repo_path, site_path, PAGES) == (expected, None)


@pytest.mark.parametrize(
    ("target", "warning"),
    [
        ("../../shared/DESIGN.md", "outside the repository"),
        ("../src/emery/__init__.py", "src/emery/__init__.py is a file that is not a page"),
        ("../examples/nothing/README.md", "examples/nothing/README.md is no file"),
    ],
)
def test_links_that_lead_out_of_the_site_warn(target: str, warning: str) -> None:
    kept, said = hooks.rewrite_link(target, "docs/a.md", "a.md", PAGES)
    assert kept == target
    assert said is not None
    assert warning in said


def test_links_in_code_are_left_alone() -> None:
    markdown = textwrap.dedent(
        """\
        [`classification`](../examples/classification/README.md) and `[x](../gone.md)`

        ```md
        [y](../gone.md)
        ```
        """
    )
    text, warnings = hooks.rewrite_links(markdown, "docs/examples.md", "examples.md", PAGES)
    assert warnings == []
    assert "(examples/classification/README.md)" in text
    assert text.count("../gone.md") == 2
