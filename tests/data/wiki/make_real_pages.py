#!/usr/bin/env python3
"""Builds real_pages.xml.bz2, the real wikitext behind the Wikipedia-dump tests, from two public
repositories' test material (see SOURCES.md): the raw article wikitext that wtf_wikipedia's tests
cache (English and German Wikipedia, CC BY-SA) and the whole pages of wikiextractor's test.xml (a
real Vietnamese Wikipedia export, cut off inside its last page). Run once by a maintainer; the
tests read only the output.

Usage: make_real_pages.py WTF_WIKIPEDIA_CHECKOUT WIKIEXTRACTOR_CHECKOUT OUTPUT.xml.bz2
"""
import bz2
import pathlib
import re
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "oracle"))
from wiki_dumps import FOOTER, HEADER, NS, Page  # noqa: E402

MAX_ARTICLE_BYTES = 60000  # leaves out the 7 longest articles, to keep the file small
REDIRECT = re.compile(r"#\s*(?:REDIRECT|đổi)\s*\[\[([^\]|]*)", re.I)


def main():
    wtf, wikiextractor, output = map(pathlib.Path, sys.argv[1:4])
    found = []
    for path in sorted((wtf / "tests" / "cache").glob("*.txt")):
        if path.stat().st_size <= MAX_ARTICLE_BYTES:
            found.append((path.stem.replace("-", " ").replace("_", " "), "0", path.read_text(encoding="utf-8")))
    export = (wikiextractor / "test.xml").read_text(encoding="utf-8")  # ends inside a page: keep the whole ones
    export = export[:export.rfind("</page>") + len("</page>")] + "</mediawiki>"
    for page in ET.fromstring(export).findall("mw:page", NS):
        found.append((page.find("mw:title", NS).text, page.find("mw:ns", NS).text,
                      page.find("mw:revision/mw:text", NS).text or ""))
    pages = []
    for i, (title, ns, text) in enumerate(found):
        m = REDIRECT.match(text)
        pages.append(Page(i + 1, title, ns, text, m.group(1) if m else None))
    output.write_bytes(bz2.compress((HEADER + "".join(p.xml() for p in pages) + FOOTER).encode(), 9))
    print(f"{output}: {len(pages)} pages, {output.stat().st_size} bytes")


if __name__ == "__main__":
    main()
