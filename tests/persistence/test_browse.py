"""browse_workflows (pages in creation order, by keyset) and subscriptions, on every backend."""

from __future__ import annotations

import sqlite3

import pytest

from persistence import SqliteStore, StepWrite, Store, open_store

from .conftest import new_wf, step


def _fill(store: Store) -> list[tuple[float, str, str, str]]:
    """30 workflows of two types, some finished, several sharing a creation time; returns
    (created_at, id, type, status) of each."""
    rows = []
    wfs = []
    for i in range(30):
        wid = f"{'auction' if i % 3 else 'quest'}-{i:02d}"
        at = float(i // 4)  # ties: four workflows per instant
        typ = "game:auction" if i % 3 else "game:quest"
        wfs.append(new_wf(wid, type=typ, at=at))
        rows.append([at, wid, typ, "running"])
    store.create_workflows(wfs)
    for r in rows[::5]:
        status = "completed" if r[1].endswith(("0", "5")) else "failed"
        store.commit_step(step(store, r[1], status=status, updated_at=50.0))
        r[3] = status
    return [tuple(r) for r in rows]  # type: ignore[misc]


def _pages(store: Store, **kw) -> list[list[str]]:
    pages, after = [], None
    while True:
        page = store.browse_workflows(after=after, limit=7, **kw)
        if not page:
            return pages
        pages.append([r.id for r in page])
        after = (page[-1].created_at, page[-1].id)


@pytest.mark.parametrize("newest_first", [True, False])
def test_pages_cover_every_workflow_once_in_order(store: Store, newest_first: bool) -> None:
    """Paging with the last row's (created_at, id) lists each workflow once, in creation order
    with ties by id, whatever the statuses; filters by status, type and id prefix combine."""
    rows = _fill(store)

    def expect(pred) -> list[str]:
        chosen = sorted((r for r in rows if pred(r)), key=lambda r: (r[0], r[1]), reverse=newest_first)
        return [r[1] for r in chosen]

    def flat(**kw) -> list[str]:
        pages = _pages(store, newest_first=newest_first, **kw)
        assert all(len(p) == 7 for p in pages[:-1])
        return [i for p in pages for i in p]

    assert flat() == expect(lambda r: True)
    assert flat(status="running") == expect(lambda r: r[3] == "running")
    assert flat(status="failed") == expect(lambda r: r[3] == "failed")
    assert flat(type="game:quest") == expect(lambda r: r[2] == "game:quest")
    assert flat(type="game:auction", status="completed") == expect(lambda r: r[2] == "game:auction" and r[3] == "completed")
    assert flat(id_prefix="auction-1") == expect(lambda r: r[1].startswith("auction-1"))
    assert flat(id_prefix="quest", status="running") == expect(lambda r: r[1].startswith("quest") and r[3] == "running")
    assert flat(id_prefix="nothing-like-it") == []
    assert flat(status="cancelled") == []


def test_a_prefix_with_like_wildcards_and_html_matches_literally(store: Store) -> None:
    """An id prefix is compared as text: % and _ are no wildcards, markup is no markup."""
    store.create_workflows([new_wf(w, at=1.0) for w in ("a%b", "axb", "a_c", "<script>x", "é-1")])
    assert [r.id for r in store.browse_workflows(id_prefix="a%")] == ["a%b"]
    assert [r.id for r in store.browse_workflows(id_prefix="a_")] == ["a_c"]
    assert [r.id for r in store.browse_workflows(id_prefix="<script>")] == ["<script>x"]
    assert [r.id for r in store.browse_workflows(id_prefix="é")] == ["é-1"]
    # Ties by id in code point order, on every backend.
    assert [r.id for r in store.browse_workflows(newest_first=False)] == sorted(["a%b", "axb", "a_c", "<script>x", "é-1"])


def test_bad_arguments_are_refused_with_what_is_accepted(store: Store) -> None:
    with pytest.raises(ValueError, match="status must be one of running, completed"):
        store.browse_workflows(status="sleeping")
    with pytest.raises(ValueError, match="limit must be a positive int"):
        store.browse_workflows(limit=0)
    with pytest.raises(ValueError, match=r"after must be a \(created_at, id\) pair"):
        store.browse_workflows(after=("x", 1))  # type: ignore[arg-type]


def test_subscriptions_of_a_workflow(store: Store) -> None:
    store.create_workflows([new_wf("boss"), new_wf("other")])
    store.commit_step(step(store, "boss", subscribe=[("raid_wipe", '"raid-1"'), ("health_changed", '"dragon"')]))
    store.commit_step(step(store, "other", subscribe=[("health_changed", '"x"')]))
    assert store.subscriptions("boss") == [("health_changed", '"dragon"'), ("raid_wipe", '"raid-1"')]
    assert store.subscriptions("nobody") == []
    store.commit_step(step(store, "boss", unsubscribe=[("raid_wipe", '"raid-1"')]))
    assert store.subscriptions("boss") == [("health_changed", '"dragon"')]


def test_a_reader_browses_while_the_owner_runs(db_path: str) -> None:
    """A store opened with owner=False pages through a file its owner keeps writing."""
    with open_store(db_path) as owner:
        owner.create_workflows([new_wf(f"w{i}", at=float(i)) for i in range(5)])
        with open_store(db_path, owner=False) as reader:
            assert [r.id for r in reader.browse_workflows(limit=2)] == ["w4", "w3"]
            owner.create_workflow(new_wf("w9", at=9.0))
            assert [r.id for r in reader.browse_workflows(limit=2)] == ["w9", "w4"]


def test_pages_read_by_the_listing_indexes(db_path: str) -> None:
    """A new file has workflows_listed and workflows_type in creation order with the id; pages
    read by them, never by a sort of the table."""
    with open_store(db_path) as s:
        assert isinstance(s, SqliteStore)
        s.create_workflows([new_wf("a", type="m:t", at=1.0)])
        s.commit_step(StepWrite(workflow_id="a", step_seq=1, updated_at=2.0))
        assert [r.id for r in s.browse_workflows(type="m:t")] == ["a"]
    conn = sqlite3.connect(db_path)
    cols = {name: [r[2] for r in conn.execute(f"PRAGMA index_info({name})")]
            for name in ("workflows_listed", "workflows_type")}
    assert cols == {"workflows_listed": ["status", "created_at", "id"],
                    "workflows_type": ["type", "status", "created_at", "id"]}
    for kw, index in (({}, "workflows_listed"), ({"type": "m:t"}, "workflows_type")):
        where = "status = ?" + (" AND type = ?" if kw else "")
        plan = " ".join(r[3] for r in conn.execute(
            f"EXPLAIN QUERY PLAN SELECT * FROM workflows WHERE {where} AND substr(id, 1, 1) = 'a' "
            f"AND (created_at, id) < (5, 'z') ORDER BY created_at DESC, id DESC LIMIT 50",
            ("running", *kw.values())))
        assert index in plan and "TEMP B-TREE" not in plan, plan
    conn.close()


def test_children_of_many_parents_in_one_call(store: Store) -> None:
    """children_of gives each parent's first children in creation order, [] for one without."""
    store.create_workflows([new_wf("p1"), new_wf("p2"), new_wf("lonely")])
    store.create_workflows([new_wf(f"p1-c{i}", parent_id="p1", at=float(10 - i)) for i in range(4)]
                           + [new_wf("p2-c", parent_id="p2", at=3.0)])
    got = store.children_of(["p1", "p2", "lonely", "p1"], 3)
    assert {k: [r.id for r in v] for k, v in got.items()} == {
        "p1": ["p1-c3", "p1-c2", "p1-c1"], "p2": ["p2-c"], "lonely": []}
    assert store.children_of([], 5) == {}
    with pytest.raises(ValueError, match="limit must be a positive int"):
        store.children_of(["p1"], 0)


def test_a_limited_list_is_the_head_of_the_whole_list(store: Store) -> None:
    """``list_workflows(limit=n)`` without a status reads n of each status from the index and
    orders them as the whole list is ordered: the same workflows, in the same order (creation
    time, ties by id), of every status, of a type or of all."""
    _fill(store)
    for type in (None, "game:auction", "game:quest"):
        whole = [r.id for r in store.list_workflows(type=type)]
        assert len(set(whole)) == len(whole) > 7
        for n in (0, 1, 3, 4, 5, 7, 13, len(whole), len(whole) + 3):
            assert [r.id for r in store.list_workflows(type=type, limit=n)] == whole[:n], (type, n)
    assert store.list_workflows(type="game:none", limit=5) == []
