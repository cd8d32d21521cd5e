"""The site's own rules: every example is a docs_src/ file that a page shows and a test runs, and the nav lists
every page. (`make docs` builds the site strictly; `make test` runs that build.)"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SOURCES = ROOT / "docs_src"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SNIPPET = re.compile(r'^--8<-- "(docs_src/[^"]+)"$')
# Fenced blocks that are no code example: shell commands to type, and diagrams.
NOT_EXAMPLES = {"sh", "text"}


def pages() -> dict[str, str]:
    return {str(p.relative_to(DOCS)): p.read_text() for p in sorted(DOCS.rglob("*.md"))}


def examples() -> list[Path]:
    return sorted(p for p in SOURCES.iterdir() if p.is_file() and p.name != "__init__.py")


def included() -> set[str]:
    found: set[str] = set()
    for text in pages().values():
        for _, body in FENCE.findall(text):
            for line in body.splitlines():
                match = SNIPPET.match(line.strip())
                if match:
                    found.add(match[1].split(":")[0])
    return found


def test_every_code_block_is_a_docs_src_file() -> None:
    inline = []
    for name, text in pages().items():
        for lang, body in FENCE.findall(text):
            lines = [line.strip() for line in body.strip().splitlines()]
            if lang in NOT_EXAMPLES and not any(SNIPPET.match(line) for line in lines):
                continue
            if not lines or not all(SNIPPET.match(line) for line in lines):
                inline.append(f"{name}: ```{lang} {lines[:1]}")
    assert not inline, "code examples written inline (make them docs_src/ files):\n" + "\n".join(inline)


def test_every_example_is_shown_and_run() -> None:
    here = Path(__file__).name
    tests = "\n".join(p.read_text() for p in (ROOT / "tests" / "docs").glob("test_*.py") if p.name != here)
    shown = included()
    for path in examples():
        relative = f"docs_src/{path.name}"
        assert relative in shown, f"{relative} is on no page"
        module = f"docs_src.{path.stem}"
        assert module in tests or path.name in tests, f"{relative} is run by no test under tests/docs/"
    missing = [name for name in shown if not (ROOT / name).is_file()]
    assert not missing, missing


def test_the_nav_lists_every_page() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)

    def walk(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [page for value in node.values() for page in walk(value)]
        if isinstance(node, list):
            return [page for value in node for page in walk(value)]
        return []

    listed = set(walk(config["nav"]))
    assert set(pages()) - listed == set(), "pages missing from the nav in mkdocs.yml"
    assert listed - set(pages()) == set(), "nav entries without a page"


def test_the_readme_is_a_front_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 400
    sources = {p.read_text() for p in examples()}
    blocks = [body for lang, body in FENCE.findall(readme) if lang == "python"]
    assert blocks, "the README shows an agent"
    for body in blocks:  # GitHub shows no snippets: the README's code is a docs_src/ file, verbatim
        assert body in sources, f"README code that is no docs_src/ file:\n{body}"
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme)
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_every_checker_rule_links_to_its_entry_on_the_rules_page() -> None:
    from acp_agent.testing import RULES, RuleViolation

    page = (DOCS / "rules.md").read_text()
    anchors = set(re.findall(r'<span id="([rsp]\d+)"></span>\*\*([RSP]\d+)\*\*', page))
    assert {rule.lower() for rule in RULES} <= {anchor for anchor, _ in anchors}
    assert all(anchor == rule.lower() for anchor, rule in anchors)
    violation = RuleViolation("R94", "something happened")
    assert "(see docs/rules.md#r94)" in str(violation).splitlines()[0]


def test_the_changelog_keeps_a_changelog_and_names_this_version() -> None:
    import tomllib

    text = (ROOT / "CHANGELOG.md").read_text()
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    releases = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert releases[0] == "Unreleased"
    assert releases[1] == version, "the newest release in CHANGELOG.md is pyproject's version"
    kinds = set(re.findall(r"^### (.+)$", text, re.M))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


REFERENCE_MODULES = ("acp_agent", "acp_agent.testing", "acp_agent.http", "acp_agent.store", "acp_agent.schema")


def test_every_public_name_has_a_docstring_the_reference_renders() -> None:
    """The Reference shows documented names only (``show_if_no_docstring: false``): a public name without a
    docstring would be missing from it."""
    griffe = pytest.importorskip("griffe")
    loader = griffe.GriffeLoader(search_paths=[str(ROOT)])
    loader.load("acp_agent")
    loader.resolve_aliases(implicit=False, external=None)
    undocumented = []
    for name in REFERENCE_MODULES:
        module = loader.modules_collection[name]
        for public in importlib.import_module(name).__all__:
            if not module[public].docstring:
                undocumented.append(f"{name}.{public}")
    assert not undocumented, undocumented


def test_every_command_line_flag_on_the_site_exists() -> None:
    """Shell lines are not docs_src/ files; the `python -m acp_agent serve|dev` flags they use must exist."""
    import subprocess
    import sys

    commands: dict[str, set[str]] = {"serve": set(), "dev": set()}
    for text in pages().values():
        for line in re.findall(r"python -m acp_agent (?:serve|dev)\b[^`\n]*", text):
            command = line.split()[3].rstrip(":,.")
            commands[command] |= set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", line))
    assert commands["serve"], "the site shows serve's flags"
    for command, flags in commands.items():
        done = subprocess.run([sys.executable, "-m", "acp_agent", command, "--help"], capture_output=True,
                              text=True, timeout=60)
        unknown = sorted(flag for flag in flags if flag not in done.stdout)
        assert not unknown, f"python -m acp_agent {command}: flags on the site that --help does not list: {unknown}"
