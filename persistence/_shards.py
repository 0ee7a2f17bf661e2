"""Shards: how a cluster's nodes divide the workflows between them, backend-neutral.

Every workflow belongs to one of a fixed number of shards, chosen by a stable hash of its id
(md5 of its UTF-8 bytes, the same in every process and every Python: never the salted built-in
``hash()``) and stored in its row, so that a child can share its parent's shard and a later re-shard is an
offline UPDATE. Shards are leased by nodes; which node should hold a shard is decided by
rendezvous (highest random weight) hashing over the live nodes: every node computes the same map
from the same list, with no coordinator, and a node that joins or leaves moves only its fair share
of the shards (about 1/N), every other shard staying where it is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

DEFAULT_SHARDS = 256


def check_shards(shards: object) -> int:
    """``shards`` if it is a usable shard count, else a ValueError saying what is."""
    if not isinstance(shards, int) or isinstance(shards, bool) or not 1 <= shards <= 65_536:
        raise ValueError(f"shards must be an int from 1 to 65536, got {shards!r}")
    return shards


def shard_of(workflow_id: str, shards: int) -> int:
    """The shard of a workflow whose placement is its own id's (0 .. shards-1): the first 32
    bits of the md5 of its UTF-8 bytes, modulo the count. md5 because a database computes the same
    value in SQL (PostgreSQL's ``md5(text)``), for rows written by SQL alone; it is a spreading
    hash here, not a security one."""
    digest = hashlib.md5(workflow_id.encode("utf-8", "surrogatepass"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big") % shards


def _weight(shard: int, node_id: str) -> bytes:
    return hashlib.blake2b(
        f"{shard}\x00{node_id}".encode("utf-8", "surrogatepass"), digest_size=8
    ).digest()


def owner_of(shard: int, nodes: Iterable[str]) -> str | None:
    """The node that should hold ``shard`` among ``nodes`` (None if there is none)."""
    best: tuple[bytes, str] | None = None
    for node in nodes:
        key = (_weight(shard, node), node)
        if best is None or key > best:
            best = key
    return None if best is None else best[1]


def assignment(shards: int, nodes: Iterable[str]) -> dict[str, set[int]]:
    """Every node's fair share: {node_id: the shards it should hold} (each shard once)."""
    live = sorted(set(nodes))
    share: dict[str, set[int]] = {n: set() for n in live}
    for s in range(shards):
        owner = owner_of(s, live)
        if owner is not None:
            share[owner].add(s)
    return share
