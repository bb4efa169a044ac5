"""MkDocs hooks (``mkdocs.yml``: ``hooks``): the repository's other READMEs as pages of the
site, and every link written as it works on GitHub.

The README is the site's home page (``index.md``); each example's and each benchmark's
README is a page at its own repository path (``examples/classification/README.md``). A
link is written relative to the file it is in, as GitHub reads it
(``../examples/classification/README.md`` in ``docs/examples.md``,
``../../docs/user-code.md`` in an example's README, ``docs/prompts.md`` in the README); this
hook rewrites a link to another page of the site to that page's place in the site, so MkDocs
then checks the page and its anchor. A link that leaves the repository, or names a file that
is not in the site (a source file, a missing file), is a warning: under ``mkdocs build
--strict`` the build fails. A folder with a README stands for its README.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import get_plugin_logger
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

REPO = Path(__file__).resolve().parents[2]
DOCS = "docs"
README_GLOBS = ("examples/*/README.md", "benchmarks/*/README.md")

log = get_plugin_logger(__name__)

SKIPPED = re.compile(
    r"^(?P<fence>```|~~~).*?^(?P=fence)[^\n]*$"  # a fenced code block
    r"|(?P<ticks>`+)(?:(?!\n\n).)+?(?P=ticks)",  # a code span, within its paragraph
    re.MULTILINE | re.DOTALL,
)
LINK = re.compile(r"(?P<head>!?\[[^\]\n]*\]\()(?P<target>[^)\s]+)(?P<tail>[^)\n]*\))")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def repository_pages(repo: Path = REPO) -> dict[str, str]:
    """Repository path → the page's path in the site, for the READMEs outside ``docs/``."""
    pages = {"README.md": "index.md"}
    for pattern in README_GLOBS:
        for path in sorted(repo.glob(pattern)):
            relative = path.relative_to(repo).as_posix()
            pages[relative] = relative
    return pages


def site_path(repo_path: str, pages: dict[str, str], repo: Path = REPO) -> str | None:
    """Where the repository file ``repo_path`` is in the site (a path under ``docs/`` or a
    page of ``pages``; a folder stands for its README), or None when it is not there."""
    if repo_path.startswith(f"{DOCS}/"):
        return repo_path.removeprefix(f"{DOCS}/")
    if (repo / repo_path).is_dir():
        repo_path = posixpath.join(repo_path, "README.md")
    return pages.get(repo_path)


def rewrite_link(
    target: str, page_repo_path: str, page_site_path: str, pages: dict[str, str], repo: Path = REPO
) -> tuple[str, str | None]:
    """``target`` (a link in the file ``page_repo_path``) as a link from ``page_site_path``,
    and a warning when it leads to no page of the site (then it is returned unchanged)."""
    if EXTERNAL.match(target) or target.startswith(("#", "/")):
        return target, None  # other sites, anchors in the page and absolute links: MkDocs'
    path, hash_mark, anchor = target.partition("#")
    repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(page_repo_path), path))
    if repo_path == ".." or repo_path.startswith("../"):
        return target, f"links to '{target}', outside the repository"
    found = site_path(repo_path, pages, repo)
    if found is None:
        what = "a file that is not a page of the site" if (repo / repo_path).exists() else "no file"
        return target, f"links to '{target}': {repo_path} is {what}"
    relative = posixpath.relpath(found, posixpath.dirname(page_site_path) or ".")
    return relative + hash_mark + anchor, None


def rewrite_links(
    markdown: str, page_repo_path: str, page_site_path: str, pages: dict[str, str]
) -> tuple[str, list[str]]:
    """Every link of ``markdown`` whose target is outside code (a fenced block, a code span;
    the link's text may hold code) rewritten by ``rewrite_link``; the warnings."""
    warnings: list[str] = []

    def one(match: re.Match[str]) -> str:
        target, warning = rewrite_link(match["target"], page_repo_path, page_site_path, pages, REPO)
        if warning:
            warnings.append(warning)
        return match["head"] + target + match["tail"]

    code = [match.span() for match in SKIPPED.finditer(markdown)]

    def outside_code(match: re.Match[str]) -> str:
        at = match.start("target")
        return match.group() if any(start <= at < end for start, end in code) else one(match)

    return LINK.sub(outside_code, markdown), warnings


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the READMEs outside ``docs/`` as pages."""
    for repo_path, uri in repository_pages().items():
        files.append(File.generated(config, uri, abs_src_path=str(REPO / repo_path)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, **_: Any) -> str:
    """Rewrite the page's links to the site's layout; warn on each that leads nowhere."""
    source = page.file.abs_src_path
    assert source is not None
    repo_path = Path(source).resolve().relative_to(REPO).as_posix()
    text, warnings = rewrite_links(markdown, repo_path, page.file.src_uri, repository_pages())
    for warning in warnings:
        log.warning("%s %s", repo_path, warning)
    return text
