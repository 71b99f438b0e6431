"""Wikipedia dumps for the tests, built from real wikitext (tests/data/wiki/real_pages.xml.bz2, see
SOURCES.md there): the real pages as they are, and larger dumps whose articles recombine the real
articles' sections (a lead with its infobox, then sections drawn from other articles), written in
MediaWiki's export format as plain XML, bz2, or a multistream bz2 with its index. Also the two
extractors' outputs read back article by article for comparison.
"""
import bz2
import html
import pathlib
import random
import re
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape, quoteattr

REAL_PAGES = pathlib.Path(__file__).resolve().parents[1] / "data" / "wiki" / "real_pages.xml.bz2"
NS = {"mw": "http://www.mediawiki.org/xml/export-0.10/"}
HEADER = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">
  <siteinfo>
    <sitename>Wikipedia</sitename>
    <dbname>enwiki</dbname>
    <base>https://en.wikipedia.org/wiki/Main_Page</base>
    <generator>MediaWiki 1.41.0-wmf.24</generator>
    <case>first-letter</case>
    <namespaces>
      <namespace key="0" case="first-letter" />
      <namespace key="6" case="first-letter">File</namespace>
      <namespace key="10" case="first-letter">Template</namespace>
      <namespace key="14" case="first-letter">Category</namespace>
    </namespaces>
  </siteinfo>
"""
FOOTER = "</mediawiki>\n"
SECTION = re.compile(r"^==[^=].*$", re.M)


class Page:
    def __init__(self, page_id, title, ns, text, redirect=None):
        self.id, self.title, self.ns, self.text, self.redirect = page_id, title, ns, text, redirect

    def xml(self):
        redirect = f"    <redirect title={quoteattr(self.redirect)} />\n" if self.redirect else ""
        return (f"  <page>\n    <title>{escape(self.title)}</title>\n    <ns>{self.ns}</ns>\n"
                f"    <id>{self.id}</id>\n{redirect}    <revision>\n      <id>{self.id + 10_000_000}</id>\n"
                f"      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
                f"      <text bytes=\"{len(self.text.encode())}\" xml:space=\"preserve\">{escape(self.text)}</text>\n"
                f"    </revision>\n  </page>\n")


def real_pages():
    root = ET.fromstring(bz2.decompress(REAL_PAGES.read_bytes()))
    pages = []
    for p in root.findall("mw:page", NS):
        r = p.find("mw:redirect", NS)
        pages.append(Page(int(p.find("mw:id", NS).text), p.find("mw:title", NS).text, p.find("mw:ns", NS).text,
                          p.find("mw:revision/mw:text", NS).text or "", r.get("title") if r is not None else None))
    return pages


def recombined_pages(count, seed=1):
    """`count` pages: articles built from real leads and sections, with 1 in 25 a redirect and 1 in
    50 a page of another namespace, as a dump has them."""
    rng = random.Random(seed)
    articles = [p for p in real_pages() if p.ns == "0" and not p.redirect]
    leads, sections = [], []
    for a in articles:
        starts = [m.start() for m in SECTION.finditer(a.text)]
        leads.append(a.text[:starts[0]] if starts else a.text)
        sections += [a.text[s:e] for s, e in zip(starts, starts[1:] + [len(a.text)])]
    pages = []
    for i in range(count):
        page_id = 1000 + i
        kind = rng.random()
        if kind < 0.04:
            pages.append(Page(page_id, f"Redirect {i}", "0", f"#REDIRECT [[Article {i - 1}]]", f"Article {i - 1}"))
        elif kind < 0.06:
            pages.append(Page(page_id, f"Template:Box {i}", "10", "{{{1}}} <noinclude>doc</noinclude>"))
        else:
            body = rng.choice(leads) + "".join(rng.choice(sections) for _ in range(rng.randint(0, 4)))
            pages.append(Page(page_id, f"Article {i}", "0", body))
    return pages


def write_dump(path, pages, kind="xml", pages_per_stream=100):
    """kind: "xml", "bz2" (one stream) or "multistream" (a bz2 stream per `pages_per_stream` pages,
    the header in a stream of its own, and PATH's index beside it). Returns the index path or None."""
    path = pathlib.Path(path)
    if kind == "xml":
        path.write_text(HEADER + "".join(p.xml() for p in pages) + FOOTER, encoding="utf-8")
        return None
    if kind == "bz2":
        path.write_bytes(bz2.compress((HEADER + "".join(p.xml() for p in pages) + FOOTER).encode()))
        return None
    index_lines, offset = [], 0
    with open(path, "wb") as out:
        offset += out.write(bz2.compress(HEADER.encode()))
        for s in range(0, len(pages), pages_per_stream):
            group = pages[s:s + pages_per_stream]
            index_lines += [f"{offset}:{p.id}:{p.title}\n" for p in group]
            offset += out.write(bz2.compress("".join(p.xml() for p in group).encode()))
        out.write(bz2.compress(FOOTER.encode()))
    index = path.with_name(path.name.replace(".xml.bz2", "-index.txt.bz2"))
    index.write_bytes(bz2.compress("".join(index_lines).encode()))
    return index


def wikiextractor_articles(folder):
    """WikiExtractor's output (<doc> blocks): {title: [lines]} without the title line, with its
    HTML-safe escaping (&amp; &lt; &gt;) undone."""
    docs = {}
    for f in sorted(pathlib.Path(folder).rglob("wiki_*")):
        for m in re.finditer(r'<doc id="\d+" url="[^"]*" title="(.*?)">\n(.*?)\n</doc>', f.read_text(), re.S):
            lines = m.group(2).split("\n")[1:]  # the title line
            docs[m.group(1)] = [html.unescape(l) for l in lines if l.strip()]
    return docs


def engine_articles(folder):
    """bert-prep wiki's output: the articles (blocks of lines ending at a blank line), in order."""
    text = "".join(f.read_text() for f in sorted(pathlib.Path(folder).glob("wiki_*.txt")))
    return [block.split("\n") for block in text.split("\n\n") if block.strip()]


def normalise(lines):
    return [" ".join(l.split()) for l in lines if l.strip()]
