"""Search engines as retrievers, without the network: local HTTP servers replay answers in each engine's
documented format (OpenAlex works JSON, Semantic Scholar Graph JSON, arXiv Atom XML, NCBI esearch JSON and
efetch PubmedArticleSet XML) from tests/retrievers/engine_responses/."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from deepresearch.programs.environment import engine_settings
from deepresearch.retrievers import open_retriever
from deepresearch.retrievers.engines import (
    ArxivEngine,
    EngineError,
    OpenAlexEngine,
    PubMedEngine,
    SemanticScholarEngine,
    SourcesFailed,
    SourcesRetriever,
    dedup_keys,
    deduplicate,
    default_cache_dir,
    engine_name,
    normalize_title,
    open_sources,
)
from deepresearch.retrievers.engines.arxiv import arxiv_query
from deepresearch.retrievers.engines.base import or_words
from deepresearch.retrievers.engines.client import retry_after_seconds
from deepresearch.retrievers.engines.openalex import rebuild_abstract
from deepresearch.retrievers.types import Doc, Retriever

RESPONSES = Path(__file__).parent / "engine_responses"
ENGINE_CLASSES = (OpenAlexEngine, SemanticScholarEngine, ArxivEngine, PubMedEngine)


# ---- a local server replaying recorded answers ---------------------------------------------------------
@dataclass
class Reply:
    status: int = 200
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


def reply(name: str, status: int = 200, **headers: str) -> Reply:
    """A reply with the body of a file in engine_responses/."""
    kind = (
        "application/atom+xml"
        if name.startswith("arxiv")
        else "text/xml"
        if name.endswith(".xml")
        else "application/json"
    )
    return Reply(status, (RESPONSES / name).read_text(encoding="utf-8"), dict(headers), kind)


@dataclass
class Request:
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    at: float


class Replay:
    """Answers each path from a script: a list of replies consumed in order (the last one repeats), or a
    function of the query parameters. Every request is recorded."""

    def __init__(self):
        self.routes: dict[str, list[Reply] | Callable[[dict[str, str]], Reply]] = {}
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.url = ""

    def on(self, path: str, *replies: Reply | Callable[[dict[str, str]], Reply]) -> Replay:
        self.routes[path] = replies[0] if len(replies) == 1 and callable(replies[0]) else list(replies)
        return self

    def answer(self, path: str, params: dict[str, str]) -> Reply:
        route = self.routes.get(path)
        if route is None:
            return Reply(404, json.dumps({"error": f"no route {path}"}))
        if callable(route):
            return route(params)
        with self.lock:
            return route.pop(0) if len(route) > 1 else route[0]

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]


def serve(replay: Replay) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            parts = urllib.parse.urlsplit(self.path)
            params = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
            replay.requests.append(
                Request(parts.path, params, {k.lower(): v for k, v in self.headers.items()}, time.monotonic())
            )
            r = replay.answer(parts.path, params)
            data = r.body.encode("utf-8")
            self.send_response(r.status)
            self.send_header("Content-Type", r.content_type)
            self.send_header("Content-Length", str(len(data)))
            for k, v in r.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # quiet
            pass

    class Server(ThreadingHTTPServer):
        def handle_error(self, request, client_address):  # a client that gave up (a timeout test): not news
            pass

    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    replay.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture
def replay():
    r = Replay()
    server = serve(r)
    yield r
    server.shutdown()
    server.server_close()


@pytest.fixture
def replay2():
    r = Replay()
    server = serve(r)
    yield r
    server.shutdown()
    server.server_close()


def refused_url() -> str:
    """A local address where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def no_keys(monkeypatch):
    for name in (
        "S2_API_KEY",
        "OPENALEX_MAILTO",
        "OPENALEX_API_KEY",
        "NCBI_API_KEY",
        "NCBI_EMAIL",
        "DEEPRESEARCH_OPENALEX_URL",
        "DEEPRESEARCH_SEMANTICSCHOLAR_URL",
        "DEEPRESEARCH_ARXIV_URL",
        "DEEPRESEARCH_PUBMED_URL",
        "DEEPRESEARCH_ENGINE_CACHE",
    ):
        monkeypatch.delenv(name, raising=False)


class Waits:
    """A sleep that records how long it was asked to wait, and waits only a moment."""

    def __init__(self):
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        await asyncio.sleep(0)


def make(cls, url: str, cache_dir: Path, **kw):
    options = {"base_url": url, "cache_dir": cache_dir, "min_interval": 0, "page_size": 2, "backoff_s": 0.01}
    return cls(**{**options, **kw})


# Each engine's routes: (page 1, page 2, empty) -> the server's routes for that page.
def openalex_routes(replay: Replay, pages=("openalex_works_page1.json", "openalex_works_page2.json")):
    replay.on(
        "/works",
        lambda p: reply(pages[int(p["page"]) - 1] if int(p["page"]) <= len(pages) else "openalex_works_empty.json"),
    )


def s2_routes(replay: Replay, pages=("s2_search_page1.json", "s2_search_page2.json")):
    replay.on(
        "/paper/search",
        lambda p: reply(pages[int(p["offset"]) // 2] if int(p["offset"]) // 2 < len(pages) else "s2_search_empty.json"),
    )


def arxiv_routes(replay: Replay, pages=("arxiv_query_page1.xml", "arxiv_query_page2.xml")):
    replay.on(
        "/query",
        lambda p: reply(pages[int(p["start"]) // 2] if int(p["start"]) // 2 < len(pages) else "arxiv_query_empty.xml"),
    )


def pubmed_routes(replay: Replay, pages=("pubmed_esearch_page1.json", "pubmed_esearch_page2.json")):
    replay.on(
        "/esearch.fcgi",
        lambda p: reply(
            pages[int(p["retstart"]) // 2] if int(p["retstart"]) // 2 < len(pages) else "pubmed_esearch_empty.json"
        ),
    )
    replay.on(
        "/efetch.fcgi",
        lambda p: reply("pubmed_efetch_page1.xml" if "38100001" in p["id"] else "pubmed_efetch_page2.xml"),
    )


ROUTES = {"openalex": openalex_routes, "semanticscholar": s2_routes, "arxiv": arxiv_routes, "pubmed": pubmed_routes}
EMPTY = {
    "openalex": ("openalex_works_empty.json",),
    "semanticscholar": ("s2_search_empty.json",),
    "arxiv": ("arxiv_query_empty.xml",),
    "pubmed": ("pubmed_esearch_empty.json",),
}
# the three documents of each engine's two recorded pages, in rank order
EXPECTED = {
    "openalex": ["arxiv:2005.11401", "10.18653/v1/2020.emnlp-main.550", "openalex:W3005680577"],
    "semanticscholar": ["arxiv:2005.11401", "10.18653/v1/2020.emnlp-main.550", "pmid:31234567"],
    "arxiv": ["arxiv:2005.11401", "arxiv:2004.04906", "10.5555/example.selfrag.2023"],
    "pubmed": ["pmid:38100002", "10.5555/exbone.2019.101", "10.5555/exnutr.2022.77"],
}
PAGE_PARAM = {
    "openalex": ("page", "2"),
    "semanticscholar": ("offset", "2"),
    "arxiv": ("start", "2"),
    "pubmed": ("retstart", "2"),
}
SEARCH_PATH = {"openalex": "/works", "semanticscholar": "/paper/search", "arxiv": "/query", "pubmed": "/esearch.fcgi"}
QUERY = "retrieval augmented generation"


@pytest.mark.parametrize("cls", ENGINE_CLASSES, ids=lambda c: c.name)
def test_a_page_of_each_engine_becomes_hits_with_the_fields_filled(cls, replay, tmp_path):
    ROUTES[cls.name](replay)
    engine = make(cls, replay.url, tmp_path)
    assert isinstance(engine, Retriever)
    hits = engine.search(QUERY, k=2)
    assert [h.doc.doc_id for h in hits] == EXPECTED[cls.name][:2]
    assert [h.rank for h in hits] == [1, 2] and hits[0].score > hits[1].score
    for h in hits:
        d = h.doc
        assert d.title and d.url and d.year and d.metadata["source"] == cls.name and d.metadata["authors"]
        assert all(isinstance(a, str) and a for a in d.metadata["authors"])
    assert replay.paths()[0] == SEARCH_PATH[cls.name]


def test_openalex_rebuilds_the_abstract_and_gives_the_pdf_link(replay, tmp_path):
    openalex_routes(replay)
    rag, dpr = [h.doc for h in make(OpenAlexEngine, replay.url, tmp_path).search(QUERY, k=2)]
    assert rag.text == (
        "Large pre-trained language models store factual knowledge in their parameters. We combine "
        "a dense retriever with a language model for generation."
    )
    assert rag.metadata["arxiv_id"] == "2005.11401" and rag.metadata["pdf_url"] == "https://arxiv.org/pdf/2005.11401"
    assert dpr.metadata["doi"] == "10.18653/v1/2020.emnlp-main.550" and dpr.url == f"https://doi.org/{dpr.doc_id}"
    assert dpr.metadata["pdf_url"].endswith("2020.emnlp-main.550.pdf") and dpr.metadata["venue"].startswith(
        "Proceedings"
    )
    assert dpr.metadata["authors"] == ["Vladimir Karpukhin", "Barlas Oğuz", "Wen-tau Yih"]
    params = replay.requests[0].params
    assert params["search"] == QUERY and params["per-page"] == "2" and params["page"] == "1"
    assert "abstract_inverted_index" in params["select"]
    assert rebuild_abstract(None) == "" and rebuild_abstract({"b": [1], "a": [0]}) == "a b"


def test_the_references_read_the_engines_metadata(replay, tmp_path):
    from deepresearch.retrievers.bibliographic import bibliographic

    arxiv_routes(replay)
    selfrag = make(ArxivEngine, replay.url, tmp_path).search(QUERY, k=1, offset=2)[0].doc
    bib = bibliographic(selfrag)
    assert bib.authors == ("Akari Asai", "Hannaneh Hajishirzi") and bib.doi == "10.5555/example.selfrag.2023"
    assert bib.venue == "International Conference on Learning Representations 2024" and bib.year == 2023
    assert selfrag.metadata["pdf_url"] == "https://arxiv.org/pdf/2310.11511v1"


def test_pubmed_reads_structured_abstracts_mesh_and_keeps_esearch_order(replay, tmp_path):
    pubmed_routes(replay)
    review, trial = [h.doc for h in make(PubMedEngine, replay.url, tmp_path).search("vitamin D fracture", k=2)]
    assert review.doc_id == "pmid:38100002" and review.published == "2018-11"  # MedlineDate "2018 Nov-Dec"
    assert trial.text.startswith("BACKGROUND: Whether vitamin D lowers fracture risk is debated. METHODS:")
    assert trial.metadata["pmcid"] == "PMC9900001" and trial.published == "2019-03-15"
    assert trial.metadata["categories"] == ["Vitamin D", "Fractures, Bone", "Aged"]
    assert trial.metadata["authors"][-1] == "Example Bone Trial Group"
    assert replay.paths() == ["/esearch.fcgi", "/efetch.fcgi"]
    assert replay.requests[1].params["id"] == "38100002,38100001" and replay.requests[0].params["sort"] == "relevance"


@pytest.mark.parametrize("cls", ENGINE_CLASSES, ids=lambda c: c.name)
def test_page_two_comes_from_the_apis_pagination(cls, replay, tmp_path):
    ROUTES[cls.name](replay)
    engine = make(cls, replay.url, tmp_path)
    third = engine.search(QUERY, k=1, offset=2)
    assert [(h.doc.doc_id, h.rank) for h in third] == [(EXPECTED[cls.name][2], 3)]
    searched = [r for r in replay.requests if r.path == SEARCH_PATH[cls.name]]
    key, value = PAGE_PARAM[cls.name]
    assert [r.params[key] for r in searched][-1] == value
    # the next page after page 1: page 1 comes from the cache, one request for page 2 only
    before = len(replay.requests)
    assert [h.doc.doc_id for h in engine.search(QUERY, k=2, offset=1)] == EXPECTED[cls.name][1:]
    assert len(replay.requests) == before  # both pages were cached by the first search
    everything = engine.search(QUERY, k=10)
    assert [h.doc.doc_id for h in everything] == EXPECTED[cls.name]  # the total says there is no page 3


@pytest.mark.parametrize("cls", ENGINE_CLASSES, ids=lambda c: c.name)
def test_empty_results(cls, replay, tmp_path):
    ROUTES[cls.name](replay, pages=EMPTY[cls.name])
    assert make(cls, replay.url, tmp_path).search("zzqxv", k=5) == []
    assert len(replay.requests) == 1  # PubMed asks efetch nothing for no PMIDs


def test_a_429_waits_as_retry_after_says_then_retries(replay, tmp_path):
    replay.on(
        "/works",
        Reply(429, json.dumps({"error": "Too Many Requests"}), {"Retry-After": "2"}),
        reply("openalex_works_page1.json"),
    )
    waits = Waits()
    hits = make(OpenAlexEngine, replay.url, tmp_path, sleep=waits).search(QUERY, k=2)
    assert len(hits) == 2 and len(replay.requests) == 2
    assert waits.asked[0] == pytest.approx(2.0)  # the server's wait, not the 0.01 s backoff


def test_a_429_really_waits_before_the_retry(replay, tmp_path):
    replay.on("/paper/search", Reply(429, "", {"Retry-After": "1"}), reply("s2_search_page1.json"))
    hits = make(SemanticScholarEngine, replay.url, tmp_path).search(QUERY, k=2)
    assert len(hits) == 2
    first, second = replay.requests
    assert second.at - first.at >= 0.95


def test_a_429_asking_too_long_fails_in_one_line(replay, tmp_path):
    replay.on("/query", Reply(429, "", {"Retry-After": "3600"}))
    with pytest.raises(EngineError) as err:
        make(ArxivEngine, replay.url, tmp_path).search(QUERY, k=2)
    assert str(err.value).startswith("arxiv: rate limited by 127.0.0.1:") and "3600s" in str(err.value)
    assert err.value.transient and len(replay.requests) == 1


def test_retry_after_as_an_http_date():
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == pytest.approx(10.0)
    assert retry_after_seconds(None) is None and retry_after_seconds("0") == 0.0


def test_5xx_then_success(replay, tmp_path):
    replay.on(
        "/esearch.fcgi",
        Reply(503, "<html><body><h1>503 Service Unavailable</h1></body></html>"),
        Reply(502, "bad gateway"),
        reply("pubmed_esearch_page1.json"),
    )
    replay.on("/efetch.fcgi", Reply(500, ""), reply("pubmed_efetch_page1.xml"))
    waits = Waits()
    hits = make(PubMedEngine, replay.url, tmp_path, sleep=waits).search("vitamin D", k=2)
    assert len(hits) == 2
    assert replay.paths() == ["/esearch.fcgi"] * 3 + ["/efetch.fcgi"] * 2
    assert waits.asked == pytest.approx([0.01, 0.02, 0.01])  # exponential backoff, per request


def test_5xx_every_time_fails_after_the_retries_naming_the_engine(replay, tmp_path):
    replay.on("/works", Reply(503, ""))
    with pytest.raises(EngineError) as err:
        make(OpenAlexEngine, replay.url, tmp_path, retries=2).search(QUERY)
    assert str(err.value) == f"openalex: HTTP 503 from 127.0.0.1:{replay.url.rsplit(':', 1)[1]} (3 attempts)"
    assert len(replay.requests) == 3


def test_a_4xx_is_not_retried_and_says_what_the_server_said(replay, tmp_path):
    replay.on("/query", reply("arxiv_query_error.xml", status=400))
    with pytest.raises(EngineError) as err:
        make(ArxivEngine, replay.url, tmp_path).search(QUERY)
    assert str(err.value).endswith(": start must be an integer") and "HTTP 400" in str(err.value)
    assert len(replay.requests) == 1


@pytest.mark.parametrize(
    "cls, body",
    [
        (OpenAlexEngine, "openalex_malformed.json"),
        (SemanticScholarEngine, "openalex_malformed.json"),
        (ArxivEngine, "openalex_malformed.json"),
        (PubMedEngine, "openalex_malformed.json"),
    ],
    ids=lambda x: getattr(x, "name", ""),
)
def test_malformed_answer_fails_in_one_line_naming_the_engine_and_is_not_cached(cls, body, replay, tmp_path):
    for path in SEARCH_PATH.values():
        replay.on(path, reply(body))
    engine = make(cls, replay.url, tmp_path)
    with pytest.raises(EngineError) as err:
        engine.search(QUERY)
    message = str(err.value)
    assert message.startswith(f"{cls.name}: malformed response from 127.0.0.1:") and "\n" not in message
    assert not err.value.transient and len(replay.requests) == 1  # not retried
    with pytest.raises(EngineError):
        engine.search(QUERY)
    assert len(replay.requests) == 2  # nothing was cached


def test_an_arxiv_error_entry_is_an_error(replay, tmp_path):
    replay.on("/query", reply("arxiv_query_error.xml"))
    with pytest.raises(EngineError, match=r"^arxiv: malformed response .*arXiv API error: start must be an integer"):
        make(ArxivEngine, replay.url, tmp_path).search(QUERY)


def test_the_date_filter_goes_to_each_api(replay, tmp_path):
    for routes in ROUTES.values():
        routes(replay)
    for cls in ENGINE_CLASSES:
        make(cls, replay.url, tmp_path, cache=False).search(QUERY, k=1, before="2020-12")
    sent = {r.path: r.params for r in replay.requests}
    assert sent["/works"]["filter"] == "to_publication_date:2020-12-31"
    assert sent["/paper/search"]["publicationDateOrYear"] == ":2020-12"
    assert sent["/query"]["search_query"].endswith(" AND submittedDate:[190001010000 TO 202012312359]")
    esearch = sent["/esearch.fcgi"]
    assert (esearch["datetype"], esearch["mindate"], esearch["maxdate"]) == ("pdat", "1800/01/01", "2020/12/31")


def test_the_date_filter_is_checked_on_the_results_too(replay, tmp_path):
    arxiv_routes(replay)  # the recorded server ignores the filter and still sends the 2023 paper
    hits = make(ArxivEngine, replay.url, tmp_path).search(QUERY, k=10, before="2021-01-15")
    assert [h.doc.doc_id for h in hits] == EXPECTED["arxiv"][:2]


def test_categories_go_to_arxiv_and_semantic_scholar(replay, tmp_path):
    arxiv_routes(replay)
    s2_routes(replay)
    hits = make(ArxivEngine, replay.url, tmp_path).search(QUERY, k=10, categories=["cs.AI"])
    assert [h.doc.doc_id for h in hits] == ["10.5555/example.selfrag.2023"]  # the only cs.AI paper
    assert "(cat:cs.AI)" in replay.requests[0].params["search_query"]
    make(SemanticScholarEngine, replay.url, tmp_path).search(QUERY, k=1, categories=["Computer Science"])
    assert replay.requests[-1].params["fieldsOfStudy"] == "Computer Science"


def test_exclusion_by_id_and_by_the_identifier_an_id_names(replay, tmp_path):
    openalex_routes(replay)
    engine = make(OpenAlexEngine, replay.url, tmp_path)
    hits = engine.search(QUERY, k=2, exclude={"arxiv:2005.11401"})
    assert [h.doc.doc_id for h in hits] == EXPECTED["openalex"][1:]
    assert [h.rank for h in hits] == [1, 2]  # ranks of the filtered ranking
    hits = engine.search(QUERY, k=5, exclude={"10.18653/V1/2020.EMNLP-MAIN.550"})  # a DOI in any case
    assert [h.doc.doc_id for h in hits] == [EXPECTED["openalex"][0], EXPECTED["openalex"][2]]


def test_secrets_are_sent_but_never_cached_logged_or_shown(replay, tmp_path, monkeypatch, caplog):
    s2_key, ncbi_key, mail = "s2-Secret-Key-0123456789abcdef", "ncbiSecretKey0123456789", "researcher@example.org"
    monkeypatch.setenv("S2_API_KEY", s2_key)
    monkeypatch.setenv("NCBI_API_KEY", ncbi_key)
    monkeypatch.setenv("OPENALEX_MAILTO", mail)
    for routes in ROUTES.values():
        routes(replay)
    caplog.set_level(logging.DEBUG, logger="deepresearch.retrievers.engines")
    cache = tmp_path / "cache"
    keys = engine_settings(["openalex", "semanticscholar", "pubmed"])["credentials"]  # as the command line reads them
    assert keys == {
        "openalex": {"mailto": mail},
        "semanticscholar": {"api_key": s2_key},
        "pubmed": {"api_key": ncbi_key, "email": mail},
    }
    for cls in (OpenAlexEngine, SemanticScholarEngine, PubMedEngine):
        make(cls, replay.url, cache, credentials=keys[cls.name]).search(QUERY, k=2)
    by_path = {r.path: r for r in replay.requests}
    assert by_path["/works"].params["mailto"] == mail
    assert by_path["/paper/search"].headers["x-api-key"] == s2_key
    assert (
        by_path["/esearch.fcgi"].params["api_key"] == ncbi_key and by_path["/efetch.fcgi"].params["api_key"] == ncbi_key
    )
    assert by_path["/esearch.fcgi"].params["email"] == mail and by_path["/esearch.fcgi"].params["tool"]
    stored = b"".join(p.read_bytes() for p in cache.rglob("*") if p.is_file())  # diskcache's SQLite files
    assert b'"body"' in stored
    assert not any(s.encode() in stored for s in (s2_key, ncbi_key, mail, "researcher%40example.org"))
    assert not any(s in caplog.text for s in (s2_key, ncbi_key, mail))
    # the cache key leaves the key out: another key finds the same answers without a request
    monkeypatch.setenv("S2_API_KEY", "another-key-9876543210")
    other = {"api_key": "another-key-9876543210"}
    sent = len(replay.requests)
    assert make(SemanticScholarEngine, replay.url, cache, credentials=other).search(QUERY, k=2)
    assert len(replay.requests) == sent
    # a server echoing the key in its error: the message does not show it
    replay.on("/paper/search", Reply(403, json.dumps({"message": "Forbidden: key another-key-9876543210 invalid"})))
    with pytest.raises(EngineError) as err:
        make(SemanticScholarEngine, replay.url, cache, cache=False, credentials=other).search("other", k=1)
    assert "another-key-9876543210" not in str(err.value) and "[REDACTED]" in str(err.value)
    assert make(SemanticScholarEngine, replay.url, cache, credentials=other).describe()["key"] is True
    assert make(SemanticScholarEngine, replay.url, cache).describe()["key"] is False  # the library reads no variable


def test_a_cache_hit_sends_no_request(replay, tmp_path):
    openalex_routes(replay)
    first = make(OpenAlexEngine, replay.url, tmp_path / "c").search(QUERY, k=2)
    again = make(OpenAlexEngine, replay.url, tmp_path / "c").search(QUERY, k=2)  # a new process, the same folder
    assert first == again and len(replay.requests) == 1
    make(OpenAlexEngine, replay.url, tmp_path / "c", cache=False).search(QUERY, k=2)
    make(OpenAlexEngine, replay.url, tmp_path / "c", cache_ttl_s=0).search(QUERY, k=2)  # too old
    assert len(replay.requests) == 3


def test_the_cache_folder_comes_from_the_environment_at_the_edge(replay, tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPRESEARCH_ENGINE_CACHE", str(tmp_path / "env-cache"))
    openalex_routes(replay)
    options = engine_settings(["openalex"])
    OpenAlexEngine(base_url=replay.url, min_interval=0, cache_dir=options["cache_dir"]).search(QUERY, k=1)
    assert (tmp_path / "env-cache" / "cache.db").is_file()
    monkeypatch.delenv("DEEPRESEARCH_ENGINE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert engine_settings(["openalex"])["cache_dir"] == str(tmp_path / "xdg" / "dspy-deepresearch" / "engines")
    assert default_cache_dir() == Path("~/.cache/dspy-deepresearch/engines").expanduser()  # the library's own


def test_the_base_url_comes_from_the_environment_at_the_edge(replay, tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPRESEARCH_ARXIV_URL", replay.url + "/")
    arxiv_routes(replay)
    assert ArxivEngine(cache_dir=tmp_path, min_interval=0).base_url == ArxivEngine.default_url  # no variable read
    engine = open_sources(
        ["arxiv"],
        cache_dir=tmp_path,
        min_interval=0,
        **{k: v for k, v in engine_settings(["arxiv"]).items() if k != "cache_dir"},
    ).parts["arxiv"]
    assert engine.base_url == replay.url and engine.search(QUERY, k=1)
    assert ArxivEngine.default_url == "https://export.arxiv.org/api"
    with pytest.raises(ValueError, match="base URL must start with http"):
        ArxivEngine(base_url="ftp://example.org")


def test_the_rate_limit_spaces_requests(replay, tmp_path):
    arxiv_routes(replay)
    # the gap is seen where the requests arrive, so a busy machine's scheduling jitter is in it: an interval of
    # a second leaves 50 ms of jitter inside the 5 % margin (0.3 s with 0.28 left 20 ms, and failed once under load)
    engine = make(ArxivEngine, replay.url, tmp_path, min_interval=1.0, cache=False)
    engine.search(QUERY, k=2)
    engine.search(QUERY, k=2)
    a, b = replay.requests
    assert b.at - a.at >= 0.95
    assert ArxivEngine.min_interval == 3.0 and PubMedEngine.min_interval == pytest.approx(1 / 3)


def test_pubmed_goes_faster_with_a_key(monkeypatch, tmp_path):
    assert PubMedEngine(cache_dir=tmp_path).client.limiter.min_interval == pytest.approx(1 / 3)
    monkeypatch.setenv("NCBI_API_KEY", "x" * 20)
    keys = engine_settings(["pubmed"])["credentials"]["pubmed"]
    assert PubMedEngine(cache_dir=tmp_path, credentials=keys).client.limiter.min_interval == pytest.approx(0.1)


def test_connection_refused_fails_in_one_line_after_the_retries(tmp_path):
    waits = Waits()
    url = refused_url()
    with pytest.raises(EngineError) as err:
        make(OpenAlexEngine, url, tmp_path, sleep=waits).search(QUERY)
    assert str(err.value) == f"openalex: connection refused at {url[len('http://') :]} (4 attempts)"
    assert err.value.transient and len(waits.asked) == 3


def test_a_timeout_fails_in_one_line(replay, tmp_path):
    def slow(params):
        time.sleep(0.5)
        return reply("openalex_works_page1.json")

    replay.on("/works", slow)
    with pytest.raises(EngineError, match=r"^openalex: timed out after 0.1s at 127.0.0.1:\d+ \(2 attempts\)$"):
        make(OpenAlexEngine, replay.url, tmp_path, timeout_s=0.1, retries=1).search(QUERY)


def test_search_works_inside_a_running_event_loop(replay, tmp_path):
    openalex_routes(replay)
    engine = make(OpenAlexEngine, replay.url, tmp_path)

    async def inside():
        return engine.search(QUERY, k=1), await engine.asearch(QUERY, k=1)

    sync_hits, async_hits = asyncio.run(inside())
    assert sync_hits == async_hits and len(sync_hits) == 1


# ---- deduplication and fusion ----------------------------------------------------------------------------
def test_normalised_titles_and_keys():
    assert normalize_title("Dense Passage Retrieval for Open-Domain\n  Question Answering") == normalize_title(
        "dense passage retrieval for open domain question answering."
    )
    assert normalize_title("Évaluation  rapide") == "evaluation rapide"
    doc = Doc("10.48550/arXiv.2005.11401", "Retrieval-Augmented Generation for NLP", "", metadata={"pmid": "123"})
    assert dedup_keys(doc) == {"arxiv:2005.11401", "pmid:123", "title:retrieval augmented generation for nlp"}
    assert dedup_keys(Doc("x", "Introduction", "")) == set()  # a short title names no paper


def test_deduplicate_by_doi_arxiv_id_and_title():
    docs = [
        Doc("10.1000/abc", "A first paper on evidence synthesis", "", metadata={"source": "openalex"}),
        Doc(
            "s2:1",
            "Something else",
            "abstract",
            metadata={"doi": "10.1000/ABC", "source": "semanticscholar", "pdf_url": "https://example.org/a.pdf"},
        ),
        Doc("arxiv:2101.00001", "Preprints and their versions of record", "text", metadata={"source": "arxiv"}),
        Doc("10.1000/xyz", "Preprints and Their Versions of Record.", "", metadata={"source": "openalex"}),
        Doc("openalex:W9", "An unrelated study of something", "", metadata={"source": "openalex"}),
        Doc("arxiv:2101.00001", "Preprints and their versions of record", "", metadata={"source": "semanticscholar"}),
    ]
    merged = deduplicate(docs)
    assert [d.doc_id for d in merged] == ["10.1000/abc", "10.1000/xyz", "openalex:W9"]
    first, preprint, _ = merged
    assert first.text == "abstract" and first.metadata["pdf_url"] == "https://example.org/a.pdf"
    assert first.metadata["sources"] == ["openalex", "semanticscholar"]
    assert preprint.text == "text" and preprint.metadata["arxiv_id"] if "arxiv_id" in preprint.metadata else True
    assert preprint.metadata["sources"] == ["arxiv", "openalex", "semanticscholar"]


def test_two_engines_fuse_with_rank_fusion_and_deduplicate(replay, replay2, tmp_path):
    openalex_routes(replay)
    arxiv_routes(replay2)
    fused = open_sources(
        ["openalex", "arxiv"],
        base_urls={"openalex": replay.url, "arxiv": replay2.url},
        cache_dir=tmp_path,
        min_interval=0,
        page_size=2,
    )
    assert isinstance(fused, SourcesRetriever) and isinstance(fused, Retriever)
    hits = fused.search(QUERY, k=10)
    ids = [h.doc.doc_id for h in hits]
    # RAG (both engines, same arXiv id) and DPR (OpenAlex's DOI, arXiv's wrapped title) once each, both first
    # then the third of each engine, tied (1/63 each): the smaller id first
    assert ids == [
        "arxiv:2005.11401",
        "10.18653/v1/2020.emnlp-main.550",
        "10.5555/example.selfrag.2023",
        "openalex:W3005680577",
    ]
    rag, dpr = hits[0].doc, hits[1].doc
    assert rag.metadata["sources"] == ["openalex", "arxiv"] and dpr.metadata["sources"] == ["openalex", "arxiv"]
    assert dpr.metadata["arxiv_id"] == "2004.04906" and dpr.metadata["doi"] == "10.18653/v1/2020.emnlp-main.550"
    assert hits[0].score == pytest.approx(2 / 61) and hits[2].score == pytest.approx(1 / 63)
    assert [h.rank for h in hits] == [1, 2, 3, 4]
    page2 = fused.search(QUERY, k=2, offset=2)
    assert [h.doc.doc_id for h in page2] == ids[2:] and [h.rank for h in page2] == [3, 4]
    # an excluded paper is left out whichever engine's id names it
    assert "10.18653/v1/2020.emnlp-main.550" not in [
        h.doc.doc_id for h in fused.search(QUERY, k=10, exclude={"arxiv:2004.04906"})
    ]


def test_a_local_corpus_fuses_with_an_engine_and_keeps_its_ids(replay, tmp_path):
    arxiv_routes(replay)
    corpus = tmp_path / "mine.jsonl"
    corpus.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {
                    "_id": "my-dpr",
                    "title": "Dense passage retrieval for open-domain question answering",
                    "text": "dense retrieval question answering passages",
                },
                {"_id": "my-other", "title": "Sparse retrieval baselines", "text": "bm25 retrieval"},
            ]
        )
        + "\n"
    )
    retrieval = open_retriever(
        str(corpus),
        sources=["arxiv"],
        source_options={
            "cache_dir": tmp_path / "c",
            "min_interval": 0,
            "page_size": 2,
            "base_urls": {"arxiv": replay.url},
        },
    )
    assert retrieval.kind == "bm25" and retrieval.corpus is not None and "arxiv" in retrieval.parts
    assert [s["name"] for s in retrieval.description["sources"]] == ["corpus", "arxiv"]
    ids = [h.doc.doc_id for h in retrieval.retriever.search("dense passage retrieval", k=10)]
    assert ids[0] == "my-dpr" and "arxiv:2004.04906" not in ids and "arxiv:2005.11401" in ids


def test_engines_alone_open_without_a_corpus(tmp_path):
    retrieval = open_retriever(sources=["s2", "pubmed", "s2"], source_options={"cache_dir": tmp_path})
    assert retrieval.corpus is None and retrieval.kind == "sources"
    assert [s["name"] for s in retrieval.description["sources"]] == ["semanticscholar", "pubmed"]
    assert retrieval.description["sources"][0]["url"] == "https://api.semanticscholar.org/graph/v1"
    with pytest.raises(ValueError, match="unknown source 'scholar'; choose from: openalex, semanticscholar"):
        open_retriever(sources=["scholar"])
    with pytest.raises(ValueError, match=r"--source openalex\|semanticscholar\|arxiv\|pubmed"):
        open_retriever()
    assert engine_name("S2") == "semanticscholar"


def test_one_engine_down_the_search_goes_on_with_the_other(replay, tmp_path, caplog):
    arxiv_routes(replay)
    down = refused_url()
    fused = open_sources(
        ["openalex", "arxiv"],
        base_urls={"openalex": down, "arxiv": replay.url},
        cache_dir=tmp_path,
        min_interval=0,
        page_size=2,
        backoff_s=0.01,
    )
    caplog.set_level(logging.INFO, logger="deepresearch.retrievers.engines")
    hits = fused.search(QUERY, k=2)
    assert [h.doc.doc_id for h in hits] == EXPECTED["arxiv"][:2]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        (
            f"openalex: search failed (connection refused at {down[len('http://') :]} (4 attempts)); "
            f"continuing with the other sources"
        )
    ]
    assert fused.failures[0]["source"] == "openalex" and not fused.failures[0]["skipped"]
    # the next search skips the engine that is down at once: no new warning line, no wait for retries
    started = time.monotonic()
    assert fused.search("dense passage", k=1)
    assert time.monotonic() - started < 1.0
    assert [r.levelno for r in caplog.records if r.levelno == logging.WARNING] == [logging.WARNING]
    assert fused.failures[1]["skipped"] and fused.failures[1]["error"].startswith("skipped: down since")


def test_every_source_down_fails_the_search_naming_each(tmp_path):
    fused = open_sources(
        ["openalex", "arxiv"],
        base_urls={"openalex": refused_url(), "arxiv": refused_url()},
        cache_dir=tmp_path,
        retries=0,
    )
    with pytest.raises(
        SourcesFailed,
        match=r"^every source failed: openalex: connection refused at .*; "
        r"arxiv: connection refused at ",
    ):
        fused.search(QUERY)
    one = open_sources(["pubmed"], base_urls={"pubmed": refused_url()}, cache_dir=tmp_path, retries=0)
    with pytest.raises(
        SourcesFailed,
        match=r"^pubmed: search failed \(connection refused at 127\.0\.0\.1:\d+ "
        r"\(1 attempt\)\)$",
    ):
        one.search(QUERY)


def test_a_malformed_answer_of_one_engine_leaves_the_other(replay, replay2, tmp_path, caplog):
    replay.on("/works", reply("openalex_malformed.json"))
    s2_routes(replay2)
    fused = open_sources(
        ["openalex", "s2"],
        base_urls={"openalex": replay.url, "s2": replay2.url},
        cache_dir=tmp_path,
        min_interval=0,
        page_size=2,
    )
    assert [h.doc.doc_id for h in fused.search(QUERY, k=2)] == EXPECTED["semanticscholar"][:2]
    assert any(
        r.getMessage().startswith("openalex: search failed (malformed response from 127.0.0.1:") for r in caplog.records
    )
    fused.search(QUERY, k=2)
    assert len(replay.requests) == 2  # not a network failure: asked again the next time


def test_a_slow_source_is_left_out_of_the_search_not_the_others(replay, replay2, tmp_path):
    def slow(params):
        time.sleep(3.0)  # far past the source's timeout, so the check below holds on a loaded machine too
        return reply("openalex_works_page1.json")

    replay.on("/works", slow)
    arxiv_routes(replay2)
    fused = open_sources(
        ["openalex", "arxiv"],
        base_urls={"openalex": replay.url, "arxiv": replay2.url},
        cache_dir=tmp_path,
        min_interval=0,
        page_size=2,
        source_timeout_s=0.2,
    )
    started = time.monotonic()
    assert [h.doc.doc_id for h in fused.search(QUERY, k=2)] == EXPECTED["arxiv"][:2]
    assert time.monotonic() - started < 2.0  # the search did not wait for the slow source's answer
    assert fused.failures[-1] == {
        **fused.failures[-1],
        "source": "openalex",
        "error": "no answer within 0.2s",
        "skipped": False,
    }
    fused.search("another query", k=1)
    assert len(replay.requests) == 2  # our own time limit does not mark the source down


def test_every_engine_leaves_the_same_words_out_of_a_question():
    # one list (retrievers/stopwords.py QUERY_STOP_WORDS): arXiv's query and the OR-ed retry of OpenAlex and PubMed
    question = "How do these methods compare between cohorts versus controls?"
    assert arxiv_query(question) == "(all:methods OR all:compare OR all:cohorts OR all:controls)"
    assert or_words(question) == "methods OR compare OR cohorts OR controls"
    # a short list, not scikit-learn's: words a scientific question needs stay
    assert or_words("Which computer system was found first?") == "computer OR system OR found OR first"


@pytest.mark.parametrize("cls, param", [(OpenAlexEngine, "search"), (PubMedEngine, "term")], ids=["openalex", "pubmed"])
def test_a_query_whose_words_together_find_nothing_is_asked_again_with_or(cls, param, replay, tmp_path):
    # both APIs AND the words of a query: a long question often finds nothing until they are OR-ed
    pages = {
        "openalex": ("openalex_works_page1.json", "openalex_works_page2.json", "openalex_works_empty.json"),
        "pubmed": ("pubmed_esearch_page1.json", "pubmed_esearch_page2.json", "pubmed_esearch_empty.json"),
    }
    first, second, empty = pages[cls.name]
    start = {"openalex": lambda p: int(p["page"]) - 1, "pubmed": lambda p: int(p["retstart"]) // 2}[cls.name]
    ROUTES[cls.name](replay)
    replay.on(SEARCH_PATH[cls.name], lambda p: reply(empty if " OR " not in p[param] else (first, second)[start(p)]))
    engine = make(cls, replay.url, tmp_path)
    hits = engine.search("Does retrieval improve the factuality of generated answers?", k=3)
    assert [h.doc.doc_id for h in hits] == EXPECTED[cls.name]
    asked = [r.params[param] for r in replay.requests if r.path == SEARCH_PATH[cls.name]]
    assert asked == [
        "Does retrieval improve the factuality of generated answers?",
        "retrieval OR improve OR factuality OR generated OR answers",
        "retrieval OR improve OR factuality OR generated OR answers",
    ]  # page 2 asks the same
    assert engine.search('"exact phrase" AND thing', k=3) == []  # a query in the API's syntax is kept as it is
