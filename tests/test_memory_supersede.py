"""Superseded facts: an update replaces the fact it updates in MEMORY.md; the ledger keeps both."""

from __future__ import annotations

from datetime import date

import pytest

from memdir.memory import MemoryConsolidator, read_consolidation_log
from memdir.models import CURRENT_KEY, ENTRIES_KEY, ExtractiveModel
from memdir.models.extractive._extract_memory import consolidate
from memdir.store.ledger import append_bullets
from memdir.testing import FunctionModel, ModelCall
from memdir.workspace import Workspace

BACKFILL = "The backfill runs in batches of 5,000 rows"
BATCH_UPDATE = "Batch size changed to 2,000 rows (was 5,000)"
DEPLOYS = "Deploys go out on Tuesdays"
DEPLOYS_UPDATE = "Deploys moved to Thursdays (was Tuesdays)"
OTHERS = ["Alice prefers green tea", "Staging runs Postgres 16 on port 5432"]

ZH_BACKFILL = "回填任务每批处理5000行"
ZH_BATCH_UPDATE = "回填任务的批大小从5000行改为2000行"
ZH_COFFEE = "我每天早上喝咖啡"
ZH_COFFEE_UPDATE = "我不再喝咖啡"
ZH_OTHERS = ["王芳负责前端开发", "测试服务器在上海机房"]

# Two old facts, their updates, and two facts the updates leave alone.
EN_AND_ZH = pytest.mark.parametrize(
    ("old", "update", "others"),
    [
        ([BACKFILL, DEPLOYS], [BATCH_UPDATE, DEPLOYS_UPDATE], OTHERS),
        ([ZH_BACKFILL, ZH_COFFEE], [ZH_BATCH_UPDATE, ZH_COFFEE_UPDATE], ZH_OTHERS),
    ],
    ids=["en", "zh"],
)


def add(ws: Workspace, *bullets: str, day: str = "2026-11-30") -> None:
    append_bullets(ws, list(bullets), header="Memory Flush", day=date.fromisoformat(day))


def ledgers(ws: Workspace) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((ws.root / "memory").glob("*.md"))}


def bullets(ws: Workspace) -> list[str]:
    return [ln[2:] for ln in ws.read_text("MEMORY.md").splitlines() if ln.startswith("- ")]


async def consolidate_offline(ws: Workspace) -> None:
    result = await MemoryConsolidator(ws, ExtractiveModel()).consolidate()
    assert result.applied and result.skipped is None


# -- the extractive consolidator -----------------------------------------------------------


@EN_AND_ZH
async def test_an_update_replaces_the_fact_already_in_memory(
    ws: Workspace, old: list[str], update: list[str], others: list[str]
) -> None:
    add(ws, *old, *others, day="2026-11-29")
    await consolidate_offline(ws)
    assert set(bullets(ws)) == {*old, *others}
    add(ws, *update)
    before = ledgers(ws)

    result = await MemoryConsolidator(ws, ExtractiveModel()).consolidate()

    assert result.applied
    assert set(bullets(ws)) == {*update, *others}
    assert ledgers(ws) == before  # the ledger is history: both versions stay there
    assert sorted(result.changed) == sorted(zip(old, update, strict=True))
    assert result.removed == ()
    record = read_consolidation_log(ws)[-1]
    assert record["status"] == "applied"
    assert sorted(map(tuple, record["changed"])) == sorted(zip(old, update, strict=True))
    assert record["removed"] == []
    assert result.history_path is not None
    saved = (ws.root / result.history_path).read_text(encoding="utf-8")
    assert all(fact in saved for fact in old)  # the previous MEMORY.md is kept too


@EN_AND_ZH
@pytest.mark.parametrize("offline", [True, False], ids=["offline", "model-keeps-all"])
async def test_old_and_new_in_the_same_batch_keep_only_the_new(
    ws: Workspace, old: list[str], update: list[str], others: list[str], offline: bool
) -> None:
    add(ws, old[0], others[0], old[1], day="2026-11-29")
    add(ws, update[0], others[1], update[1])
    before = ledgers(ws)

    if offline:
        await consolidate_offline(ws)
    else:  # a model that keeps every bullet it is shown
        await MemoryConsolidator(ws, FunctionModel(rewrite(set()))).consolidate()  # type: ignore[arg-type]

    assert set(bullets(ws)) == {*update, *others}
    assert ledgers(ws) == before


async def test_the_update_takes_the_old_fact_s_place(ws: Workspace) -> None:
    ws.write_text(
        "MEMORY.md",
        f"# Memory\n\n## Data pipeline\n- {BACKFILL}\n- Exports land in s3://acme/exports\n",
    )
    add(ws, BATCH_UPDATE)
    await consolidate_offline(ws)
    assert ws.read_text("MEMORY.md") == (
        f"# Memory\n\n## Data pipeline\n- {BATCH_UPDATE}\n- Exports land in s3://acme/exports\n"
    )


async def test_a_later_update_replaces_the_earlier_one(ws: Workspace) -> None:
    add(ws, BACKFILL, day="2026-11-28")
    add(ws, BATCH_UPDATE, day="2026-11-29")
    add(ws, "Batch size changed back to 5,000 rows (was 2,000)")
    await consolidate_offline(ws)
    assert bullets(ws) == ["Batch size changed back to 5,000 rows (was 2,000)"]


# Pairs that look like updates but are not: the old fact must stay.
UNRELATED = [
    # two different facts with numbers
    ("The API rate limit is 100 requests per minute", "The build now takes 8 minutes"),
    ("Server B has 16 GB RAM", "Server A now has 32 GB RAM"),
    # an update cue about a different subject
    (BACKFILL, "The sync job batch size changed to 2,000 rows (was 5,000)"),
    (BACKFILL, "The sync job batch size changed to 500 rows"),
    ("We use Postgres for billing", "We use MySQL instead of Postgres for analytics"),
    ("Alice works on billing and payments", "Alice no longer works on billing"),
    ("Alice owns the payments service", "Alice no longer works on billing"),
    ("Bob: I live in Munich", "Alice: I now live in Berlin"),
    # "not X but Y" of an unrelated thing
    ("The office is in Berlin", "The demo is not on Monday but on Tuesday"),
    ("The team standup is on Monday", "The retro is not on Monday but on Friday"),
    # the old fact says more than the update
    ("Batch sizes: 5,000 for the backfill, 2,000 for sync", "Backfill batch size is now 2,000"),
    ("The app database is Postgres 16", "We switched the app database from Postgres to MySQL"),
    # Chinese: a different subject, a fact that says more, a different speaker
    (ZH_BACKFILL, "同步任务的批大小从5000行改为2000行"),
    ("我喝咖啡和茶", ZH_COFFEE_UPDATE),
    ("缓存用的是Redis", "数据库从Postgres换成MySQL"),
    ("李明负责数据库迁移", "负责人改为王芳（原来是李明）"),
    ("Bob：我住在北京", "Alice：我现在住在上海"),
]

# Updates, in more shapes than the tests above.
UPDATES = [
    ("The standup is at 9:30", "The standup moved to 10:00"),
    ("The app database is Postgres", "We switched the app database from Postgres to MySQL"),
    ("We use Postgres", "We use MySQL instead of Postgres"),
    ("Server A has 16 GB RAM", "Server A now has 32 GB RAM"),
    ("The API response time is 300ms", "The API response time has improved to 250ms"),
    ("The snack budget is $65", "Adjusted the snack budget to $75"),
    ("Rent is $1,200", "Rent is now $1,500 (was $1,200)"),
    ("Alice works on billing", "Alice no longer works on billing"),
    ("The office is in Berlin", "The office is not in Berlin but in Munich"),
    ("Postgres 16 listens on port 5432", "Postgres 16 now listens on port 6432"),
    (
        "User: the backfill runs in batches of 5,000 rows",
        "User: backfill batch size changed to 2,000 rows",
    ),
    ("批处理大小是5000行", "批处理大小现在是2000行"),
    ("项目负责人是李明", "负责人改为王芳（原来是李明）"),
    ("数据库用的是Postgres", "数据库从Postgres换成MySQL"),
    ("用户：回填任务每批处理5000行", "用户：回填任务的批大小改成2000行（原来是5000行）"),
]


@pytest.mark.parametrize(("old", "new"), UNRELATED)
def test_an_unrelated_fact_is_never_dropped(old: str, new: str) -> None:
    merged = consolidate(f"# Memory\n\n## Facts\n- {old}\n", [new])
    assert f"- {old}\n" in merged and f"- {new}\n" in merged


@pytest.mark.parametrize(("old", "new"), UPDATES)
def test_updates_in_other_words_replace_the_old_fact(old: str, new: str) -> None:
    merged = consolidate(f"# Memory\n\n## Facts\n- {old}\n- Alice prefers green tea\n", [new])
    assert merged == f"# Memory\n\n## Facts\n- {new}\n- Alice prefers green tea\n"


def unrelated_pairs_written(ws: Workspace) -> list[str]:
    """MEMORY.md with the old side of :data:`UNRELATED`, a ledger with the new side; the
    old facts."""
    old = [o for o, _ in UNRELATED]
    ws.write_text("MEMORY.md", "# Memory\n\n## Facts\n" + "".join(f"- {o}\n" for o in old))
    add(ws, *(n for _, n in UNRELATED))
    return old


async def test_unrelated_facts_with_update_cues_stay_through_the_consolidator(
    ws: Workspace,
) -> None:
    old = unrelated_pairs_written(ws)
    result = await MemoryConsolidator(ws, ExtractiveModel()).consolidate()
    assert result.applied and result.changed == () and result.removed == ()
    assert set(old) <= set(bullets(ws))


# -- a language model's answer ---------------------------------------------------------------


def rewrite(drop: set[str], extra: tuple[str, ...] = ()) -> object:
    """A model that keeps the current bullets except ``drop``, then adds the new entries and
    ``extra`` (bullets in its own words)."""

    def answer(call: ModelCall) -> str:
        meta = call.messages[-1].metadata
        current = [b[2:] for b in str(meta[CURRENT_KEY]).splitlines() if b.startswith("- ")]
        kept = [b for b in current if b not in drop] + list(meta[ENTRIES_KEY]) + list(extra)
        return "# Memory\n\n" + "".join(f"- {b}\n" for b in kept)

    return answer


@EN_AND_ZH
@pytest.mark.parametrize("drops", [True, False], ids=["drops", "keeps"])
async def test_a_model_that_drops_superseded_facts_or_keeps_them_ends_with_the_update(
    ws: Workspace, old: list[str], update: list[str], others: list[str], drops: bool
) -> None:
    # A model that keeps the old fact beside its update: only the update stays.
    ws.write_text("MEMORY.md", "# Memory\n\n" + "".join(f"- {b}\n" for b in [*old, *others]))
    add(ws, *update)
    before = ledgers(ws)
    model = FunctionModel(rewrite(set(old) if drops else set()))  # type: ignore[arg-type]

    result = await MemoryConsolidator(ws, model).consolidate()

    assert result.applied and result.skipped is None
    assert bullets(ws) == [*others, *update]
    assert sorted(result.changed) == sorted(zip(old, update, strict=True))
    assert result.removed == ()
    assert ledgers(ws) == before  # the ledger keeps both values, and so does the history
    assert result.history_path is not None
    assert all(fact in (ws.root / result.history_path).read_text("utf-8") for fact in old)
    system = model.calls[0].system or ""
    assert "remove the old bullet" in system and "never keep both" in system


async def test_a_model_that_drops_unrelated_facts_is_still_refused(ws: Workspace) -> None:
    original = "# Memory\n\n" + "".join(f"- {b}\n" for b in [BACKFILL, DEPLOYS, *OTHERS])
    ws.write_text("MEMORY.md", original)
    add(ws, BATCH_UPDATE, DEPLOYS_UPDATE)
    model = FunctionModel(rewrite(set(OTHERS)))  # type: ignore[arg-type]

    result = await MemoryConsolidator(ws, model).consolidate()

    assert result.skipped == "too_many_removals" and not result.applied
    assert ws.read_text("MEMORY.md") == original
    record = read_consolidation_log(ws)[-1]
    assert record["status"] == "refused" and sorted(record["would_remove"]) == sorted(OTHERS)


async def test_an_update_of_another_subject_does_not_excuse_a_loss(ws: Workspace) -> None:
    original = "# Memory\n\n" + "".join(f"- {b}\n" for b in [BACKFILL, DEPLOYS, *OTHERS])
    ws.write_text("MEMORY.md", original)
    add(
        ws, "The sync job batch size changed to 2,000 rows (was 5,000)", "Releases moved to Fridays"
    )
    model = FunctionModel(rewrite({BACKFILL, DEPLOYS}))  # type: ignore[arg-type]

    result = await MemoryConsolidator(ws, model).consolidate()

    assert result.skipped == "too_many_removals"
    assert ws.read_text("MEMORY.md") == original


async def test_a_model_s_own_update_counts_and_unrelated_facts_are_never_dropped(
    ws: Workspace,
) -> None:
    old = unrelated_pairs_written(ws)
    # Every fact kept, and the batch size said again in the model's own words.
    answer = rewrite(set(), extra=("Backfill batch size is now 2,000 rows",))

    result = await MemoryConsolidator(ws, FunctionModel(answer)).consolidate()  # type: ignore[arg-type]

    assert result.applied and result.removed == ()
    # The model's update counts as the newest: the backfill's old batch size goes.
    assert BACKFILL not in bullets(ws)
    assert "Backfill batch size is now 2,000 rows" in bullets(ws)
    assert set(old) - {BACKFILL} <= set(bullets(ws))
