"""PubMed through NCBI E-utilities (https://www.ncbi.nlm.nih.gov/books/NBK25500/): `esearch.fcgi` finds the
PMIDs of a page (JSON, `retstart`/`retmax`, sorted by relevance), `efetch.fcgi` reads their records
(PubmedArticleSet XML), put back in the order esearch ranked them.

Documented limits: 3 requests per second without a key, 10 with one (`credentials["api_key"]`, which the
command line reads from $NCBI_API_KEY); NCBI asks for a `tool` name and a contact `email` (the command line's
$NCBI_EMAIL, else $OPENALEX_MAILTO). `before` becomes
`datetype=pdat&mindate=1800/01/01&maxdate=YYYY/MM/DD`. PubMed ANDs a plain query's words; when that finds
nothing, its words are OR-ed (`SearchEngine.loose_query`). Categories are the records' MeSH descriptor names
(checked on the results). A record in PubMed Central carries its `pmcid`; PubMed gives no PDF link.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Collection, Mapping

from deepresearch.retrievers.bibliographic import normalize_doi
from deepresearch.retrievers.engines.base import Page, SearchEngine, clean_meta, first_text, month_end
from deepresearch.retrievers.types import Doc

TOOL = "dspy-deepresearch"
MONTHS = {m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), start=1)}


def _all_text(node: ET.Element | None) -> str:
    """The text of an element and its children (AbstractText holds <i>, <sup>...)."""
    return first_text("".join(node.itertext())) if node is not None else ""


def _month(value: str) -> int | None:
    value = value.strip().lower()
    if value.isdigit() and 1 <= int(value) <= 12:
        return int(value)
    return MONTHS.get(value[:3])


def _ymd(node: ET.Element | None) -> str | None:
    """`YYYY-MM-DD`, `YYYY-MM` or `YYYY` from a date element's Year, Month and Day; None without a numeric Year."""
    year = (node.findtext("Year") or "").strip() if node is not None else ""
    if node is None or not year.isdigit():
        return None
    month, day = _month(node.findtext("Month") or ""), (node.findtext("Day") or "").strip()
    if month and day.isdigit():
        return f"{year}-{month:02d}-{int(day):02d}"
    return f"{year}-{month:02d}" if month else year


def _date(article: ET.Element) -> str | None:
    """`YYYY-MM-DD`, `YYYY-MM` or `YYYY`: the journal issue's PubDate (or MedlineDate), made more precise by the
    electronic ArticleDate of the same year, else that ArticleDate."""
    issue = _issue_date(article)
    electronic = _ymd(article.find("MedlineCitation/Article/ArticleDate"))
    if issue is None or (electronic and len(issue) == 4 and electronic.startswith(issue)):
        return electronic
    return issue


def _issue_date(article: ET.Element) -> str | None:
    pub = article.find("MedlineCitation/Article/Journal/JournalIssue/PubDate")
    if pub is None or (pub.findtext("Year") or "").strip():
        return _ymd(pub)
    m = re.match(r"\s*(\d{4})(?:\s+([A-Za-z]{3}))?", pub.findtext("MedlineDate") or "")
    if m is None:
        return None
    month = _month(m.group(2) or "")
    return f"{m.group(1)}-{month:02d}" if month else m.group(1)


def _author(node: ET.Element) -> str:
    given = _all_text(node.find("ForeName")) or _all_text(node.find("Initials"))
    return _all_text(node.find("CollectiveName")) or " ".join(p for p in (given, _all_text(node.find("LastName"))) if p)


def article_to_doc(article: ET.Element) -> Doc:
    """A `Doc` from one PubmedArticle: id = its DOI, else `pmid:<n>`."""
    pmid = _all_text(article.find("MedlineCitation/PMID"))
    if not pmid.isdigit():
        raise ValueError("a PubmedArticle without a PMID")
    art = article.find("MedlineCitation/Article")
    ids = {(i.get("IdType") or "").lower(): _all_text(i) for i in article.findall("PubmedData/ArticleIdList/ArticleId")}
    doi = normalize_doi(ids.get("doi")) or next(
        (
            normalize_doi(_all_text(e))
            for e in (art.findall("ELocationID") if art is not None else [])
            if (e.get("EIdType") or "").lower() == "doi"
        ),
        None,
    )
    parts = []
    for node in art.findall("Abstract/AbstractText") if art is not None else []:
        text = _all_text(node)
        label = node.get("Label")
        if text:
            parts.append(f"{label}: {text}" if label and label.upper() != "UNLABELLED" else text)
    date = _date(article)
    published = date if date and len(date) >= 7 else None  # Doc.published is YYYY-MM[-DD]; a bare year is Doc.year
    meta = clean_meta(
        {
            "source": "pubmed",
            "pmid": pmid,
            "doi": doi.lower() if doi else None,
            "pmcid": ids.get("pmc") or None,
            "authors": [
                a for a in (_author(n) for n in (art.findall("AuthorList/Author") if art is not None else [])) if a
            ],
            "venue": _all_text(art.find("Journal/Title")) if art is not None else None,
            "categories": [
                _all_text(d) for d in article.findall("MedlineCitation/MeshHeadingList/MeshHeading/DescriptorName")
            ],
        }
    )
    return Doc(
        doc_id=meta.get("doi") or f"pmid:{pmid}",
        title=_all_text(art.find("ArticleTitle")) if art is not None else "",
        text=" ".join(parts),
        url=f"https://pubmed.ncbi.nlm.nih.gov/{pmid}/",
        year=int(date[:4]) if date else None,
        published=published,
        metadata=meta,
    )


def parse_esearch(body: str) -> tuple[list[str], int | None]:
    data = json.loads(body)
    result = data.get("esearchresult") if isinstance(data, Mapping) else None
    if not isinstance(result, Mapping):
        raise ValueError("no 'esearchresult' in the answer")
    if result.get("ERROR"):
        raise ValueError(f"esearch error: {str(result['ERROR'])[:200]}")
    ids = result.get("idlist") or []
    if not isinstance(ids, list):
        raise ValueError("'idlist' is not a list")
    count = str(result.get("count") or "")
    return [str(i) for i in ids], int(count) if count.isdigit() else None


def parse_efetch(body: str) -> list[Doc]:
    root = ET.fromstring(body)
    if root.tag != "PubmedArticleSet":
        raise ValueError(f"not a PubmedArticleSet (root element {root.tag!r})")
    articles = root.findall("PubmedArticle")
    docs = []
    for article in articles:
        try:
            docs.append(article_to_doc(article))
        except ValueError:  # one unreadable record costs that record, not the page
            continue
    if articles and not docs:
        raise ValueError(f"none of the {len(articles)} records could be read")
    return docs


class PubMedEngine(SearchEngine):
    """PubMed search (esearch + efetch). Key and contact: `credentials={"api_key": ..., "email": ...}` (the CLI:
    $NCBI_API_KEY; $NCBI_EMAIL, else $OPENALEX_MAILTO)."""

    name = "pubmed"
    default_url = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils"
    url_env = "DEEPRESEARCH_PUBMED_URL"
    page_size = 20
    max_results = 9999  # esearch returns the first 10,000 records of a query
    min_interval = 1 / 3  # 3 requests per second without a key
    secret_keys = ("api_key", "email")
    syntax = re.compile(r"\[|\"|\b(?:AND|OR|NOT)\b")  # field tags, phrases, boolean operators

    def __init__(self, **kwargs):
        if kwargs.get("min_interval") is None and ((kwargs.get("credentials") or {}).get("api_key") or "").strip():
            kwargs["min_interval"] = 0.1  # 10 requests per second with a key
        super().__init__(**kwargs)

    async def fetch_page(
        self, query: str, start: int, size: int, before: str | None, categories: Collection[str]
    ) -> Page:
        params = {
            "db": "pubmed",
            "term": query,
            "retstart": start,
            "retmax": size,
            "retmode": "json",
            "sort": "relevance",
            "tool": TOOL,
        }
        if before:
            params.update(datetype="pdat", mindate="1800/01/01", maxdate=month_end(before).replace("-", "/"))
        ids, total = await self.client.get("/esearch.fcgi", params, parse_esearch)
        if not ids:
            return Page([], total)
        docs = await self.client.get(
            "/efetch.fcgi", {"db": "pubmed", "id": ",".join(ids), "retmode": "xml", "tool": TOOL}, parse_efetch
        )
        by_pmid = {d.metadata["pmid"]: d for d in docs}
        ordered = [by_pmid[i] for i in ids if i in by_pmid]
        # a record efetch did not return (withdrawn) still took its place in the ranking
        return Page(ordered, total, returned=len(ids))
