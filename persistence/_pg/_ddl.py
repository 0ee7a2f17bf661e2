"""DDL that both the schema (``_schema``) and the cluster (``_cluster``) rely on: the
storage settings of queue tables, and the cluster's tables, fence and routing triggers. A leaf
module: it imports neither of them, so they need not import each other."""

from __future__ import annotations

from persistence._pg._errors import EXPECT_SQLSTATE, FENCED_SQLSTATE
from persistence._shards import DEFAULT_SHARDS

# Queue tables: vacuumed every couple of thousand dead rows however large the table is, with a
# higher cost budget so that vacuum keeps up with the churn.
QUEUE = (
    "autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000, "
    "autovacuum_analyze_scale_factor = 0.05, autovacuum_vacuum_cost_limit = 2000"
)


def shard_sql(column: str, shards: int) -> str:
    """SQL of the shard of the id in ``column`` (``md5``, as ``persistence._shards.shard_of``)."""
    return f"(('x' || substr(md5({column}), 1, 8))::bit(32)::bigint % {shards})::integer"


def cluster_ddl(s: str, shards: int = DEFAULT_SHARDS) -> list[str]:
    """The cluster's statements of the schema (``_schema._v1``) for the (quoted) schema ``s``,
    after the workflows and inbox tables."""
    me = "nullif(current_setting('actorflow.incarnation', true), '')::uuid"
    own_hash = shard_sql("NEW.id", shards)
    return [
        # The shard of every workflow is in its row (the workflows table's ``shard`` column, set
        # by the af_place trigger). A partial index on columns a running step leaves alone: the step's UPDATE stays HOT.
        f"CREATE INDEX workflows_shard ON {s}.workflows (shard) WHERE status = 'running'",
        f"""CREATE TABLE {s}.af_nodes (
            node_id text PRIMARY KEY,
            incarnation uuid NOT NULL,
            lock_key bigint NOT NULL,
            state text NOT NULL,
            heartbeat_at timestamptz NOT NULL,
            started_at timestamptz NOT NULL,
            probed_at timestamptz,
            pid integer,
            host text,
            -- its heartbeat ttl, so that any reader (``wf nodes``) can tell a node whose
            -- heartbeat is older than its lease (``stale``) from one that is up
            ttl double precision
        )""",
        f"""CREATE TABLE {s}.af_shards (
            shard integer PRIMARY KEY,
            owner uuid,
            epoch bigint NOT NULL DEFAULT 0,
            since timestamptz
        )""",
        f"INSERT INTO {s}.af_shards (shard) SELECT generate_series(0, {shards - 1})",
        f"""CREATE TABLE {s}.af_wakeups (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            shard integer NOT NULL,
            workflow_id text NOT NULL
        ) WITH ({QUEUE})""",
        f"CREATE INDEX af_wakeups_shard ON {s}.af_wakeups (shard)",
        f"INSERT INTO {s}.meta (key, value) VALUES ('shards', '{shards}')",
        # A write's check, made by the server inside the transaction (``PgWriter.expect``):
        # a step's guarded UPDATE, its consumed rows, its inserts, each touched as many rows as
        # it must, or the transaction fails before its COMMIT, sent with it, can apply.
        f"""CREATE FUNCTION {s}.af_expect(got bigint, want bigint) RETURNS void
            LANGUAGE plpgsql AS $$
            BEGIN
              IF got <> want THEN
                RAISE EXCEPTION 'a check of this transaction failed: % rows where % were expected',
                  got, want USING ERRCODE = '{EXPECT_SQLSTATE}';
              END IF;
            END $$""",
        # Commit tokens: a writer that sent COMMIT and lost its connection before the answer
        # looks its token up (``PgWriter._commit_sealed``); each writer trims its own.
        f"""CREATE TABLE {s}.af_commits (
            writer bigint NOT NULL,
            token bigint NOT NULL,
            at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (writer, token)
        )""",
        # The fence: the first statement of a step's transaction.
        f"""CREATE FUNCTION {s}.af_fence(sh integer, ep bigint, inc uuid) RETURNS void
            LANGUAGE plpgsql AS $$
            BEGIN
              PERFORM set_config('actorflow.incarnation', inc::text, true);
              PERFORM 1 FROM {s}.af_shards WHERE shard = sh AND owner = inc AND epoch = ep
                FOR SHARE;
              IF NOT FOUND THEN
                RAISE EXCEPTION 'fenced: shard % (epoch %) is no longer leased by this node, '
                  'nothing of this transaction was committed', sh, ep
                  USING ERRCODE = '{FENCED_SQLSTATE}';
              END IF;
            END $$""",
        # A child spawned without a placement of its own goes to its parent's shard; any other
        # workflow to its own id's.
        f"""CREATE FUNCTION {s}.af_place() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF NEW.shard IS NULL AND NEW.parent_id IS NOT NULL THEN
                SELECT w.shard INTO NEW.shard FROM {s}.workflows w WHERE w.id = NEW.parent_id;
              END IF;
              IF NEW.shard IS NULL THEN
                NEW.shard := {own_hash};
              END IF;
              RETURN NEW;
            END $$""",
        f"CREATE TRIGGER af_place BEFORE INSERT ON {s}.workflows FOR EACH ROW "
        f"EXECUTE FUNCTION {s}.af_place()",
        # A child spawned with placement="spread", just inserted in its parent's shard by the
        # parent's step: to its own id's shard, with a wake-up for that shard's owner.
        f"""CREATE FUNCTION {s}.af_spread(wid text) RETURNS void LANGUAGE plpgsql AS $$
            DECLARE
              sh integer;
            BEGIN
              UPDATE {s}.workflows SET shard = {shard_sql("wid", shards)}
                WHERE id = wid AND step_seq = 0 RETURNING shard INTO sh;
              IF sh IS NULL THEN
                RETURN;
              END IF;
              PERFORM 1 FROM {s}.af_shards WHERE shard = sh AND owner = {me} FOR SHARE;
              IF NOT FOUND THEN
                INSERT INTO {s}.af_wakeups (shard, workflow_id) VALUES (sh, wid);
              END IF;
            END $$""",
        # Routing: a new inbox row (or a new workflow) in a shard the writing session does not
        # lease gets a wake-up row for its owner, in the same transaction. One in a shard it
        # leases share-locks the lease row, so a takeover waits for this commit and then finds
        # the row (its recovery reads the shard's workflows with work).
        f"""CREATE FUNCTION {s}.af_route() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE
              sh integer;
              wid text;
            BEGIN
              IF TG_TABLE_NAME = 'workflows' THEN
                sh := NEW.shard;
                wid := NEW.id;
              ELSE
                wid := NEW.workflow_id;
                SELECT w.shard INTO sh FROM {s}.workflows w WHERE w.id = wid;
                IF sh IS NULL THEN
                  RETURN NULL;
                END IF;
              END IF;
              PERFORM 1 FROM {s}.af_shards WHERE shard = sh AND owner = {me} FOR SHARE;
              IF NOT FOUND THEN
                INSERT INTO {s}.af_wakeups (shard, workflow_id) VALUES (sh, wid);
              END IF;
              RETURN NULL;
            END $$""",
        f"CREATE TRIGGER af_route AFTER INSERT ON {s}.inbox FOR EACH ROW "
        f"EXECUTE FUNCTION {s}.af_route()",
        f"CREATE TRIGGER af_route AFTER INSERT ON {s}.workflows FOR EACH ROW "
        f"WHEN (NEW.status = 'running') EXECUTE FUNCTION {s}.af_route()",
    ]
