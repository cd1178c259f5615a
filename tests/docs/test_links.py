"""Nothing dangling: every markdown link and anchor in the repository resolves, every document named exists."""

from __future__ import annotations

import re

from tests.docs.markdown_links import (
    ROOT,
    TEXT_SUFFIXES,
    anchors,
    broken_link,
    markdown_links,
    named_documents,
    slug,
    tracked_files,
)

# Documents that are not in this repository and must not be cited (spelled in pieces so this file cites none).
FOREIGN = ["DESIGN", "PROTOCOL", "MEASURED"]


def test_the_anchor_of_a_heading_is_the_one_mkdocs_gives_it() -> None:
    assert slug("`POST /reef/report`") == "post-reefreport"
    assert slug("The lineage: a tie is not a loss") == "the-lineage-a-tie-is-not-a-loss"
    assert "choosing-the-forward-and-the-dtype" in anchors(ROOT / "docs/guides/embedded-engine.md")


def test_every_relative_link_in_a_markdown_file_leads_to_a_file_and_heading_that_exist() -> None:
    broken = [
        problem
        for page in tracked_files()
        if page.suffix == ".md"
        for target in markdown_links(page)
        if (problem := broken_link(page, target))
    ]
    assert broken == []


def test_every_document_named_in_code_tests_or_docs_exists() -> None:
    missing = []
    for path in tracked_files():
        if path.suffix not in TEXT_SUFFIXES and path.name != "Makefile":
            continue
        for document, anchor in named_documents(path):
            target = ROOT / document
            if not target.exists():
                missing.append(f"{path.relative_to(ROOT)}: {document}")
            elif anchor and anchor not in anchors(target):
                missing.append(f"{path.relative_to(ROOT)}: {document}#{anchor}")
    assert missing == []


def test_no_file_cites_a_document_that_is_not_in_the_repository() -> None:
    pattern = re.compile(r"\b(?:" + "|".join(FOREIGN) + r")\.md\b")
    citing = []
    for path in tracked_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        citing += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in pattern.finditer(text)]
    assert citing == []
