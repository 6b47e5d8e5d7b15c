import { type Kysely, PostgresAdapter, sql } from 'kysely'

// Frozen: this file is the schema and the data as they were on 2026-12-01. Later changes are new
// migrations.
//
// The compact journal (docs/durability.md, "The journal"): a commit's transitions are one row of
// `journal_entries`, with the snapshot after the last of them; the machine replays the others'
// events for time travel. One row per commit instead of one per transition: a step writes one
// B-tree entry where it wrote three, and one snapshot where it wrote three.
//
// `transitions` becomes a read-only view of the entries, one row per transition with the columns
// the table had, so that whatever reads transitions with SQL (show, the chaos checks, an
// operator's query) reads them as before. Its `snapshot_json` is the entry's snapshot on the
// entry's last transition and null on the ones before it.
//
// Every existing transition becomes an entry of its own with its own snapshot, wrapped in the
// version 1 envelope `{"v":1,"snapshot":...}`: what the run machine's persisted snapshot was up
// to this day. Its event was stored by type alone, so the entry holds `{"type": ...}`; a
// one-transition entry is never replayed, so nothing more is needed.

const ENVELOPE_HEAD = '{"v":1,"snapshot":'

export async function up(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter
  const text = postgres ? sql`text collate "C"` : 'text'
  await db.schema
    .createTable('journal_entries')
    .addColumn('run_id', text, (c) => c.notNull().references('runs.id').onDelete('cascade'))
    // The seq of the entry's last transition: "the last entry" is the highest key of the run.
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('first_seq', 'integer', (c) => c.notNull())
    .addColumn('transitions_json', text, (c) => c.notNull())
    .addColumn('snapshot_json', text, (c) => c.notNull())
    .addPrimaryKeyConstraint('journal_entries_pk', ['run_id', 'seq'])
    // Clustered on SQLite, like the other per-step tables (see 2026-11-29T210000-clustered-tables).
    .$call((b) => (postgres ? b : b.modifyEnd(sql`without rowid`)))
    .execute()

  if (postgres) {
    await sql`insert into "journal_entries" ("run_id", "seq", "first_seq", "transitions_json", "snapshot_json")
      select "run_id", "seq", "seq",
        json_build_array(json_build_object('seq', "seq", 'from', "from_state", 'event', json_build_object('type', "event"), 'to', "to_state", 'at', "at"))::text,
        ${ENVELOPE_HEAD} || "snapshot_json" || '}'
      from "transitions"`.execute(db)
  } else {
    await sql`insert into "journal_entries" ("run_id", "seq", "first_seq", "transitions_json", "snapshot_json")
      select "run_id", "seq", "seq",
        json_array(json_object('seq', "seq", 'from', "from_state", 'event', json_object('type', "event"), 'to', "to_state", 'at', "at")),
        ${ENVELOPE_HEAD} || "snapshot_json" || '}'
      from "transitions"`.execute(db)
  }
  await db.schema.dropTable('transitions').execute()

  if (postgres) {
    await sql`create view "transitions" as
      select e."run_id",
        (t.value ->> 'seq')::integer as "seq",
        (t.value ->> 'from') collate "C" as "from_state",
        (t.value -> 'event' ->> 'type') collate "C" as "event",
        (t.value ->> 'to') collate "C" as "to_state",
        case when (t.value ->> 'seq')::integer = e."seq" then e."snapshot_json" end as "snapshot_json",
        (t.value ->> 'at') collate "C" as "at"
      from "journal_entries" e cross join lateral jsonb_array_elements(e."transitions_json"::jsonb) as t(value)`.execute(db)
  } else {
    await sql`create view "transitions" as
      select e."run_id" as "run_id",
        json_extract(t.value, '$.seq') as "seq",
        json_extract(t.value, '$.from') as "from_state",
        json_extract(t.value, '$.event.type') as "event",
        json_extract(t.value, '$.to') as "to_state",
        case when json_extract(t.value, '$.seq') = e."seq" then e."snapshot_json" end as "snapshot_json",
        json_extract(t.value, '$.at') as "at"
      from "journal_entries" e, json_each(e."transitions_json") t`.execute(db)
  }
}

/**
 * Back to one row per transition. An entry of several transitions holds one snapshot: each of its
 * transitions gets that one (resume reads only the last, which is right; the earlier ones are the
 * machine's to replay, which the older schema cannot).
 */
export async function down(db: Kysely<any>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter
  const text = postgres ? sql`text collate "C"` : 'text'
  await sql`drop view "transitions"`.execute(db)
  await db.schema
    .createTable('transitions')
    .addColumn('run_id', text, (c) => c.notNull().references('runs.id').onDelete('cascade'))
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('from_state', text, (c) => c.notNull())
    .addColumn('event', text, (c) => c.notNull())
    .addColumn('to_state', text, (c) => c.notNull())
    .addColumn('snapshot_json', text, (c) => c.notNull())
    .addColumn('at', text, (c) => c.notNull())
    .addPrimaryKeyConstraint('transitions_pk', ['run_id', 'seq'])
    .$call((b) => (postgres ? b : b.modifyEnd(sql`without rowid`)))
    .execute()
  if (postgres) {
    await sql`insert into "transitions" ("run_id", "seq", "from_state", "event", "to_state", "snapshot_json", "at")
      select e."run_id", (t.value ->> 'seq')::integer, t.value ->> 'from', t.value -> 'event' ->> 'type', t.value ->> 'to',
        (e."snapshot_json"::jsonb -> 'snapshot')::text, t.value ->> 'at'
      from "journal_entries" e cross join lateral jsonb_array_elements(e."transitions_json"::jsonb) as t(value)`.execute(db)
  } else {
    await sql`insert into "transitions" ("run_id", "seq", "from_state", "event", "to_state", "snapshot_json", "at")
      select e."run_id", json_extract(t.value, '$.seq'), json_extract(t.value, '$.from'), json_extract(t.value, '$.event.type'), json_extract(t.value, '$.to'),
        json_extract(e."snapshot_json", '$.snapshot'), json_extract(t.value, '$.at')
      from "journal_entries" e, json_each(e."transitions_json") t`.execute(db)
  }
  await db.schema.dropTable('journal_entries').execute()
}
