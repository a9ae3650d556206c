"""The UI's reading pages in a real browser and over HTTP: the ledgers, a memory file at a
line, the sessions and their transcripts (compaction summaries with what they replaced), and
search with the matched words marked; paths that leave their area, another tenant's pages and
stored markup are refused or shown as text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from _browser import Page
from _server import memdir
from _ui import (
    CHINESE_FACT,
    NS,
    OTHER_FACT,
    OTHER_NS,
    TRANSCRIPTS,
    UiServer,
    ui_server,
)
from memdir.server.ui._highlight import pieces
from memdir.server.ui._paging import window

COMPACTED_NS = "acme.compacted"
BIG_NS = "acme.big"
HOSTILE = "<script>alert(1)</script> xssprobe <img src=x onerror=alert(1)>"
BIG_LINES = 450
BUSY_NS = "acme.busy"
BUSY_LINES = 1_200
UPDATED_NS = "acme.updated"
STALE = "- 09:00 user: The nightly backfill job runs in batches of 2,000 rows"
CURRENT = (
    "- 16:30 user: Heads-up for whoever reads the pipeline notes later this week: the "
    "backfill batch size is now 5,000 rows, since the replica keeps up fine at night"
)


@pytest.fixture(scope="module", params=["files", "postgres"])
def ui(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    for served in ui_server(request, tmp_path_factory):
        ws = served.served.workspace
        # A replay that compacts every few messages: its log holds the summaries, folded in.
        memdir(
            "-w", ws, "--namespace", COMPACTED_NS, "ingest",
            str(TRANSCRIPTS / "coupon-api.claude-code.jsonl"),
            "--trigger-messages", "6", "--keep-messages", "2", "--session-id", "compacted",
        )  # fmt: skip
        memdir("-w", ws, "--namespace", COMPACTED_NS, "index", "--embedder", "e5")  # hybrid
        memdir("-w", ws, "--namespace", NS, "add", HOSTILE)
        facts = "\n".join(f"bigfile fact number {n}" for n in range(1, BIG_LINES + 1))
        memdir("-w", ws, "--namespace", BIG_NS, "add", facts)
        day_facts = "\n".join(f"busy day fact {n}" for n in range(1, BUSY_LINES + 1))
        memdir("-w", ws, "--namespace", BUSY_NS, "add", day_facts)
        updated = served.served.local(UPDATED_NS)
        updated.write_text("memory/2026-11-20.md", STALE + "\n")
        updated.write_text("memory/2026-11-24.md", CURRENT + "\n")
        with served.served.client("acme_write") as client:
            logged = client.post(
                f"/v1/namespaces/{NS}/sessions/hostile/messages",
                json={"format": "openai", "messages": [{"role": "user", "content": HOSTILE}]},
            )
            assert logged.status_code == 201, logged.text
            said = [text.split(": ", 1)[1] for text in (STALE, CURRENT)]
            logged = client.post(
                f"/v1/namespaces/{UPDATED_NS}/sessions/pipeline/messages",
                json={
                    "format": "openai",
                    "messages": [{"role": "user", "content": text} for text in said],
                },
            )
            assert logged.status_code == 201, logged.text
        yield served


def login(ui: UiServer, page: Page) -> Page:
    """``page`` logged in with the read key, once the login's answer has loaded (a page
    opened before it would be sent to the login page)."""
    from selenium.webdriver.support.ui import WebDriverWait

    page.login(ui.key("acme_read"))
    WebDriverWait(page.driver, 60).until(lambda d: "/ui/login" not in d.current_url)
    return page


def targeted(page: Page) -> Any:
    """The element the address's fragment targets (``None``: none)."""
    return page.driver.execute_script("return document.querySelector(':target')")


def get(ui: UiServer, path: str, key: str = "acme_read") -> Any:
    with ui.served.client() as client:
        client.cookies.set("memdir_ui", ui.key(key))
        return client.get(path, follow_redirects=False)


# -- in the browser ---------------------------------------------------------------------------


def test_a_chinese_search_marks_the_words_and_its_citation_opens_the_ledger_line(
    ui: UiServer, page: Page
) -> None:
    login(ui, page)
    page.open(f"/ui/ns/{NS}/search?q={quote('用户的猫叫小橘')}")
    page.screenshot("search")
    hit = next(
        h
        for h in page.all("li.hit")
        if "小橘" in h.text and "memory/" in h.find_element("css selector", "a.cite").text
    )
    marked = "".join(m.text for m in hit.find_elements("css selector", "mark"))
    assert "小橘" in marked and "用户" in marked
    assert "每天早上七点" not in marked, "only the words of the query are marked"
    shown = hit.find_element("css selector", ".hit-text").text
    assert CHINESE_FACT in shown and not shown.startswith("-"), "the fact, not its list mark"
    link = hit.find_element("css selector", "a.cite")
    citation = link.text
    page.go(link)
    page.assert_nothing_ran()
    assert page.path.startswith(f"/ui/ns/{NS}/file?path=memory")
    row = targeted(page)
    assert row is not None and row.get_attribute("id") == "L" + citation.split("#L")[1]
    assert CHINESE_FACT in row.text
    assert "cited" in row.get_attribute("class").split()
    page.screenshot("file")


def test_a_memory_bullet_leads_to_its_ledger_line_and_the_conversation_message(
    ui: UiServer, page: Page
) -> None:
    login(ui, page)
    page.open(f"/ui/ns/{NS}/")
    bullet = next(b for b in page.all(".bullet") if "pytest" in b.text)
    page.go(bullet.find_element("partial link text", "sources"))
    page.assert_nothing_ran()
    page.go(next(a for a in page.all("a.cite") if "/file?path=memory" in a.get_attribute("href")))
    page.assert_nothing_ran()
    row = targeted(page)
    assert row is not None and "pytest" in row.text
    page.go(row.find_element("css selector", "a.source"))  # the conversation it came from
    page.assert_nothing_ran()
    assert page.path.startswith(f"/ui/ns/{NS}/sessions/billing-migration?line=")
    message = targeted(page)
    assert message is not None and "pytest" in message.text
    assert page.path.endswith("#" + message.get_attribute("id"))


def test_the_ledgers_are_listed_newest_first_and_a_day_says_where_each_bullet_came_from(
    ui: UiServer, page: Page
) -> None:
    login(ui, page)
    page.open(f"/ui/ns/{NS}/ledgers")
    page.screenshot("ledgers")
    days = [a.text for a in page.all("table.ledgers tbody th a")]
    assert len(days) >= 2 and days == sorted(days, reverse=True)
    page.click_link(days[-1])  # the oldest: the ingested conversations' first day
    assert page.text("h1") == f"Ledger {days[-1]}"
    sources = page.all(".bullet a.source")
    assert sources and all("conversation" in a.text for a in sources)
    page.screenshot("ledger-day")


def test_a_transcript_shows_each_compaction_summary_with_the_messages_it_replaced(
    ui: UiServer, page: Page
) -> None:
    login(ui, page)
    page.open(f"/ui/ns/{COMPACTED_NS}/sessions")
    page.screenshot("sessions")
    page.click_link("compacted")
    summaries = page.all("li.summary")
    assert summaries, "the replay compacted, and later compactions logged the summaries"
    first = summaries[0]
    assert "## SUMMARY" in first.find_element("css selector", ".summary-text").text
    first.find_element("css selector", "details.replaced summary").click()
    replaced = first.find_elements("css selector", "details.replaced li")
    assert replaced and "coupon endpoint" in replaced[0].text
    line = first.get_attribute("id")
    opening = page.find("li#L1")
    assert f"replaced by the summary at line {line[1:]}" in opening.text
    page.screenshot("transcript")


def test_stored_markup_is_shown_as_text_and_never_runs(ui: UiServer, page: Page) -> None:
    login(ui, page)
    page.open(f"/ui/ns/{NS}/search?q=xssprobe&in=both")  # checks that nothing ran
    hits = page.all("li.hit")
    assert len(hits) >= 2, "a memory hit and a session hit"
    for hit in hits:
        assert "<img src=x onerror=alert(1)>" in hit.text
    assert not page.all("main img") and not page.all("main script")
    page.open(f"/ui/ns/{NS}/sessions/hostile")
    assert "<script>alert(1)</script>" in page.text("ol.transcript")
    assert not page.all("main img") and not page.all("main script")


# -- over HTTP --------------------------------------------------------------------------------


def test_a_path_that_leaves_the_memory_files_is_refused_and_nothing_is_read(
    ui: UiServer,
) -> None:
    for path in (  # another tenant's memory, and this one's sidecars and logs, are the canaries
        "../../etc/passwd",
        f"../{OTHER_NS}/MEMORY.md",
        f"memory/../../{OTHER_NS}/memory/x.md",
        "/etc/passwd",
        "memory/.provenance/MEMORY.md.json",
        "memory/.history/consolidation.log.jsonl",
        "sessions/hostile.log.jsonl",
    ):
        answer = get(ui, f"/ui/ns/{NS}/file?path={quote(path)}")
        assert answer.status_code in (400, 404), path
        assert "root:" not in answer.text and OTHER_FACT not in answer.text, path
        assert '"bullets"' not in answer.text and "xssprobe" not in answer.text, path
    for path in ("sessions/..%2F..%2Fx", "sessions/..%2Fsessions%2Fhostile", "sessions/.hidden"):
        answer = get(ui, f"/ui/ns/{NS}/{path}")
        assert answer.status_code == 404, path
        assert "xssprobe" not in answer.text, path


def test_another_tenants_reading_pages_are_404_and_show_nothing(ui: UiServer) -> None:
    for path in (
        "ledgers",
        "ledgers/2026-01-01",
        "file?path=MEMORY.md&line=1",
        "sessions",
        "sessions/hostile",
        "search?q=binder&in=both",
    ):
        answer = get(ui, f"/ui/ns/{OTHER_NS}/{path}")
        assert answer.status_code == 404, path
        assert OTHER_FACT not in answer.text and "red binder" not in answer.text, path


def test_bad_parameters_are_a_page_saying_what_to_give(ui: UiServer) -> None:
    for path, words in (
        ("ledgers/2026-13-45", "YYYY-MM-DD"),
        ("ledgers/2026-W01-1", "YYYY-MM-DD"),
        ("file?path=MEMORY.md&line=abc", "line must be"),
        ("file", "say which file"),
        ("search?q=x&mode=fuzzy", "lexical or hybrid"),
        ("search?q=x&in=everything", "memory, sessions or both"),
        ("search?q=%20", "blank"),
        ("sessions/hostile?start=-1", "start must be"),
    ):
        answer = get(ui, f"/ui/ns/{NS}/{path}")
        assert answer.status_code == 400, path
        assert words in answer.text and "text/html" in answer.headers["content-type"], path


def test_hybrid_asked_for_without_vectors_says_so_and_shows_the_lexical_hits(
    ui: UiServer,
) -> None:
    hybrid = get(ui, f"/ui/ns/{NS}/search?q=pytest&mode=hybrid")
    assert "Hybrid search is not available" in hybrid.text
    assert "In memory (lexical)" in hybrid.text and "<mark>pytest</mark>" in hybrid.text
    lexical = get(ui, f"/ui/ns/{NS}/search?q=pytest&mode=lexical")
    assert "not available" not in lexical.text and "<mark>pytest</mark>" in lexical.text
    sessions = get(ui, f"/ui/ns/{NS}/search?q=pytest&in=sessions")
    assert "In memory" not in sessions.text
    assert f"/ui/ns/{NS}/sessions/billing-migration?line=" in sessions.text


def test_with_vectors_the_search_is_hybrid_and_lexical_can_be_asked_for(ui: UiServer) -> None:
    hybrid = get(ui, f"/ui/ns/{COMPACTED_NS}/search?q=Wang+Lei")
    assert "In memory (hybrid)" in hybrid.text and "not available" not in hybrid.text
    lexical = get(ui, f"/ui/ns/{COMPACTED_NS}/search?q=Wang+Lei&mode=lexical")
    assert "In memory (lexical)" in lexical.text and "not available" not in lexical.text
    hits = lexical.text.split('<li class="hit">')[1:]
    assert hits and all("<mark>Wang</mark>" in hit for hit in hits), "words only"


def test_a_stale_hit_links_the_newer_line_and_the_newer_one_what_it_updates(
    ui: UiServer,
) -> None:
    text = get(ui, f"/ui/ns/{UPDATED_NS}/search?q=nightly+backfill+job+batch+rows").text
    hits = text.split('<li class="hit">')[1:]
    assert "5,000" in hits[0] and "2,000" in hits[1]  # the newer value first
    newer = f"/ui/ns/{UPDATED_NS}/file?path=memory%2F2026-11-24.md&amp;line=1#L1"
    assert "stale:" in hits[1] and newer in hits[1]
    assert "newer than:" in hits[0] and "memory%2F2026-11-20.md&amp;line=1#L1" in hits[0]
    # The same in the logged messages: the later one first, each naming the other.
    said = get(ui, f"/ui/ns/{UPDATED_NS}/search?q=nightly+backfill+job+batch+rows&in=sessions")
    hits = said.text.split('<li class="hit">')[1:]
    assert "5,000" in hits[0] and "2,000" in hits[1]
    session = f"/ui/ns/{UPDATED_NS}/sessions/pipeline?line="
    assert "newer than:" in hits[0] and f"{session}1#L1" in hits[0]
    assert "stale:" in hits[1] and f"{session}2#L2" in hits[1]


def test_a_large_file_shows_a_window_around_the_cited_line(ui: UiServer) -> None:
    listed = get(ui, f"/ui/ns/{BIG_NS}/ledgers")
    day = listed.text.split(f"/ui/ns/{BIG_NS}/ledgers/")[1][:10]
    answer = get(ui, f"/ui/ns/{BIG_NS}/file?path=memory/{day}.md&line=400")
    text = answer.text
    assert 'class="line-row cited" id="L400"' in text
    assert "bigfile fact number 398" in text  # line 400 holds fact 398 (a heading is first)
    assert 'id="L1"' not in text and f'id="L{BIG_LINES + 2}"' in text
    first = BIG_LINES + 2 - 200 + 1  # the last 200 lines: line 400 is among them
    assert f"Lines {first}–{BIG_LINES + 2} of {BIG_LINES + 2}" in text
    earlier = re.search(r'<a href="([^"]+)" rel="prev">', text)
    assert earlier is not None and earlier[1].endswith(f"start={first - 200}")
    first = get(ui, f"/ui/ns/{BIG_NS}/file?path=memory/{day}.md")
    assert 'id="L1"' in first.text and 'id="L201"' not in first.text


def test_a_busy_day_is_shown_a_page_of_lines_at_a_time(ui: UiServer) -> None:
    listed = get(ui, f"/ui/ns/{BUSY_NS}/ledgers")
    day = listed.text.split(f"/ui/ns/{BUSY_NS}/ledgers/")[1][:10]
    first = get(ui, f"/ui/ns/{BUSY_NS}/ledgers/{day}").text
    assert "busy day fact 1<" in first and 'id="L500"' in first and 'id="L501"' not in first
    later = re.search(r'<a href="([^"]+)" rel="next">', first)
    assert later is not None and later[1].endswith("start=501")
    last = get(ui, f"/ui/ns/{BUSY_NS}/ledgers/{day}?start=1001").text
    # line 1,202 (a heading first) holds the last fact, with its provenance and anchor
    assert f"busy day fact {BUSY_LINES}<" in last and f'id="L{BUSY_LINES + 2}"' in last
    assert 'id="L1000"' not in last and "added by a person" in last


# -- without a server -------------------------------------------------------------------------


def test_the_marks_follow_the_index_terms_and_stay_outside_markup() -> None:
    assert pieces("We ran the Migrations; migrating again", "migration") == [
        ("We ran the ", False),
        ("Migrations", True),
        ("; ", False),
        ("migrating", True),
        (" again", False),
    ]
    assert pieces("<script>alert(1)</script>", "script") == [
        ("<", False),
        ("script", True),
        (">alert(1)</", False),
        ("script", True),
        (">", False),
    ]
    assert ("2026-01-05", True) in pieces("cut-over on 2026-01-05, not 01", "2026-01-05")
    assert ("01", True) not in pieces("cut-over on 2026-01-05, not 01", "2026-01-05")
    assert pieces("the cat", "the cat") == [("the ", False), ("cat", True)]


def test_a_window_holds_the_line_it_is_opened_at() -> None:
    shown = window(450, 200, focus=400)
    assert shown.first <= 400 <= shown.last and shown.last == 450
    assert shown.previous == shown.first - 200 and shown.next is None
    assert window(450, 200, start=201).next == 401
    assert window(0, 200).last < window(0, 200).first
