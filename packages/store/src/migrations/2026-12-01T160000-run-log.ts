import { type Kysely, PostgresAdapter, sql } from 'kysely'

// Frozen: this file is the schema and the data as they were on 2026-12-01. Later changes are new
// migrations.
//
// SQLite only: a run's per-step rows (its receipts, steps, journal entries and tool effects) move
// into one table, `run_log`, keyed `(run_id, step, kind, n)` (docs/durability.md, "How a run is
// stored"). A step's commit settles receipt N, inserts step N, its journal entry and the receipt
// of step N + 1: in four clustered tables that dirtied four B-tree leaves (and split each of them
// in turn), here it dirties the table's last page and the one leaf of its key where the run's
// range ends. `kind` is `a` (an attempt, n = attempt), `s` (the step, n = 0), `j` (a journal
// entry, n = its seq) or `t` (a tool effect, n = position); a row fills the columns of its kind
// and leaves the others NULL, a byte of record header each.
//
// A rowid table with a unique index on the key, not a WITHOUT ROWID one: rows arrive in commit
// order, so the table only ever grows at its end, where SQLite splits a full leaf by starting a
// new one; a clustered table of rows this wide (an entry is most of a kilobyte) split at every
// few commits, rebalancing the full leaf with its neighbours, and wrote more pages a commit.
// The CHECKs compare with `=` rather than `IN (...)`: SQLite evaluates an IN list of three or
// more through a temporary index built at each statement, which cost more than the rest of the
// commit (measured in the change that added this file).
//
// A journal entry sits at the step `steps + 1` of its run after its commit (steps: the run's
// completed steps): where the run's next rows go, never less than an earlier entry's, so the
// run's last entry is the last `j` of its key range. Existing entries get that step from their
// snapshot (the running maximum, so that a hand-edited snapshot cannot put one out of order).
//
// The four old names become views with the columns the tables had, in their order, and INSTEAD
// OF triggers write through them, so that every query (the repositories, `show`, an operator's
// SQL) reads and writes as before. Only the run writer writes `run_log` directly. A view has no
// defaults: its insert trigger gives an omitted column the default the table had. On PostgreSQL
// nothing changes.

/** `column = 'a' or column = 'b' ...`: an IN list without the temporary index (see above). */
const oneOf = (column: string, values: ReadonlyArray<string>): string => `(${values.map((v) => `"${column}" = '${v}'`).join(' or ')})`

const COLUMNS = `"id" integer primary key, "run_id" text not null references "runs" ("id") on delete cascade, "step" integer not null, "kind" text not null, "n" integer not null,
  "provider" text, "reason" text, "outcome" text, "error_kind" text, "http_status" integer, "error_message" text, "latency_ms" integer, "ttft_ms" integer,
  "tokens_in" integer, "tokens_out" integer, "partial_text" text, "started_at" text, "settled_at" text,
  "prompt_summary" text, "text" text, "tool_calls_json" text, "results_json" text, "feedback" text, "at" text,
  "first_seq" integer, "transitions_json" text, "snapshot_json" text,
  "tool_call_id" text, "name" text, "arguments" text, "status" text, "result_json" text, "completed_at" text,
  constraint "run_log_kind_check" check ${oneOf('kind', ['a', 's', 'j', 't'])},
  constraint "run_log_attempt_check" check ("kind" <> 'a' or ("provider" is not null and "started_at" is not null
    and ${oneOf('reason', ['initial', 'retry', 'fallover'])} and ${oneOf('outcome', ['pending', 'ok', 'failed', 'unknown', 'cancelled'])})),
  constraint "run_log_step_check" check ("kind" <> 's' or ("n" = 0 and "provider" is not null and "prompt_summary" is not null and "text" is not null
    and "tool_calls_json" is not null and "tokens_in" is not null and "tokens_out" is not null and "at" is not null)),
  constraint "run_log_entry_check" check ("kind" <> 'j' or ("first_seq" is not null and "transitions_json" is not null and "snapshot_json" is not null)),
  constraint "run_log_effect_check" check ("kind" <> 't' or ("tool_call_id" is not null and "name" is not null and "arguments" is not null
    and "status" is not null and "started_at" is not null))`

/** Each old table: its kind, its `n`, and its columns in their order (all stored under the same name but `n`). */
const VIEWS: ReadonlyArray<{ readonly name: string; readonly kind: string; readonly n: string; readonly columns: ReadonlyArray<string> }> = [
  {
    name: 'attempts',
    kind: 'a',
    n: 'attempt',
    columns: [
      'run_id',
      'step',
      'attempt',
      'provider',
      'reason',
      'outcome',
      'error_kind',
      'http_status',
      'error_message',
      'latency_ms',
      'ttft_ms',
      'tokens_in',
      'tokens_out',
      'partial_text',
      'started_at',
      'settled_at'
    ]
  },
  {
    name: 'steps',
    kind: 's',
    n: '',
    columns: ['run_id', 'step', 'provider', 'prompt_summary', 'text', 'tool_calls_json', 'results_json', 'feedback', 'tokens_in', 'tokens_out', 'at']
  },
  { name: 'journal_entries', kind: 'j', n: 'seq', columns: ['run_id', 'seq', 'first_seq', 'transitions_json', 'snapshot_json'] },
  {
    name: 'tool_effects',
    kind: 't',
    n: 'position',
    columns: ['run_id', 'step', 'position', 'tool_call_id', 'name', 'arguments', 'status', 'result_json', 'started_at', 'completed_at']
  }
]

/** The defaults the tables had, which a view's insert trigger supplies. */
const DEFAULTS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  attempts: { outcome: `'pending'` },
  steps: { prompt_summary: `''`, text: `''`, tool_calls_json: `'[]'`, tokens_in: '0', tokens_out: '0' }
}

/** The step a journal entry written through its view sits at (see above): after every earlier entry, and at `steps + 1`. */
const ENTRY_STEP = `max(coalesce((select "steps" from "runs" where "id" = new."run_id"), 0) + 1,
  coalesce((select "step" from "run_log" where "run_id" = new."run_id" and "kind" = 'j' order by "step" desc, "kind" desc, "n" desc limit 1), 0))`

/** The same value (running maximum) for the entries of an older store, read from their snapshots. */
const MIGRATED_ENTRY_STEP = `max(coalesce(case when json_valid("snapshot_json") then cast(json_extract("snapshot_json", '$.snapshot.context.completedSteps') as integer) end, 0))
  over (partition by "run_id" order by "seq" rows unbounded preceding) + 1`

const isPostgres = (db: Kysely<any>): boolean => db.getExecutor().adapter instanceof PostgresAdapter

const storedColumns = (view: (typeof VIEWS)[number]): string[] => view.columns.filter((c) => c !== 'run_id' && c !== 'step' && c !== view.n)

export async function up(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) return
  // A store that has `run_log` already lost only the record of this migration (a restored
  // `kysely_migration`, or how a test makes a current store look older): its rows are moved.
  const done = await sql<{ n: number }>`select count(*) as n from sqlite_master where type = 'table' and name = 'run_log'`.execute(db)
  if (Number(done.rows[0]?.n) > 0) return
  await sql.raw(`create table "run_log" (${COLUMNS})`).execute(db)
  await sql`create unique index "run_log_key" on "run_log" ("run_id", "step", "kind", "n")`.execute(db)
  for (const view of VIEWS) {
    const stored = storedColumns(view)
    const step = view.kind === 'j' ? MIGRATED_ENTRY_STEP : '"step"'
    const n = view.n === '' ? '0' : `"${view.n}"`
    await sql
      .raw(
        `insert into "run_log" ("run_id", "step", "kind", "n", ${stored.map((c) => `"${c}"`).join(', ')})
         select "run_id", ${step}, '${view.kind}', ${n}, ${stored.map((c) => `"${c}"`).join(', ')} from "${view.name}"`
      )
      .execute(db)
    await sql.raw(`drop table "${view.name}"`).execute(db)
  }
  for (const view of VIEWS) {
    const stored = storedColumns(view)
    // An entry's step is none of its columns: its triggers find it in its run's range by seq.
    const key = `"run_id" = old."run_id"${view.kind === 'j' ? '' : ' and "step" = old."step"'} and "kind" = '${view.kind}' and "n" = ${view.n === '' ? '0' : `old."${view.n}"`}`
    const select = view.columns.map((c) => (c === view.n ? `"n" as "${c}"` : `"${c}"`))
    await sql.raw(`create view "${view.name}" as select ${select.join(', ')} from "run_log" where "kind" = '${view.kind}'`).execute(db)
    const value = (c: string): string => (DEFAULTS[view.name]?.[c] === undefined ? `new."${c}"` : `coalesce(new."${c}", ${DEFAULTS[view.name]![c]})`)
    const insertStep = view.kind === 'j' ? ENTRY_STEP : 'new."step"'
    const insertN = view.n === '' ? '0' : `new."${view.n}"`
    const unique =
      view.kind === 'j'
        ? `select raise(abort, 'UNIQUE constraint failed: journal_entries.run_id, journal_entries.seq')
             where exists (select 1 from "run_log" where "run_id" = new."run_id" and "kind" = 'j' and "n" = new."seq");`
        : ''
    await sql
      .raw(
        `create trigger "${view.name}_insert" instead of insert on "${view.name}" begin ${unique}
           insert into "run_log" ("run_id", "step", "kind", "n", ${stored.map((c) => `"${c}"`).join(', ')})
           values (new."run_id", ${insertStep}, '${view.kind}', ${insertN}, ${stored.map(value).join(', ')}); end`
      )
      .execute(db)
    const set = ['run_id', ...(view.kind === 'j' ? [] : ['step']), ...(view.n === '' ? [] : [view.n]), ...stored].map(
      (c) => `"${c === view.n ? 'n' : c}" = new."${c}"`
    )
    await sql
      .raw(`create trigger "${view.name}_update" instead of update on "${view.name}" begin update "run_log" set ${set.join(', ')} where ${key}; end`)
      .execute(db)
    await sql.raw(`create trigger "${view.name}_delete" instead of delete on "${view.name}" begin delete from "run_log" where ${key}; end`).execute(db)
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) return
  const tables: Record<string, string> = {
    attempts: `("run_id" text not null references "runs" ("id") on delete cascade, "step" integer not null, "attempt" integer not null, "provider" text not null, "reason" text not null, "outcome" text default 'pending' not null, "error_kind" text, "http_status" integer, "error_message" text, "latency_ms" integer, "ttft_ms" integer, "tokens_in" integer, "tokens_out" integer, "partial_text" text, "started_at" text not null, "settled_at" text, constraint "attempts_pk" primary key ("run_id", "step", "attempt"), constraint "attempts_reason_check" check (reason in ('initial', 'retry', 'fallover')), constraint "attempts_outcome_check" check (outcome in ('pending', 'ok', 'failed', 'unknown', 'cancelled')))`,
    steps: `("run_id" text not null references "runs" ("id") on delete cascade, "step" integer not null, "provider" text not null, "prompt_summary" text default '' not null, "text" text default '' not null, "tool_calls_json" text default '[]' not null, "results_json" text, "feedback" text, "tokens_in" integer default 0 not null, "tokens_out" integer default 0 not null, "at" text not null, constraint "steps_pk" primary key ("run_id", "step"))`,
    journal_entries: `("run_id" text not null references "runs" ("id") on delete cascade, "seq" integer not null, "first_seq" integer not null, "transitions_json" text not null, "snapshot_json" text not null, constraint "journal_entries_pk" primary key ("run_id", "seq"))`,
    tool_effects: `("run_id" text not null references "runs" ("id") on delete cascade, "step" integer not null, "position" integer not null, "tool_call_id" text not null, "name" text not null, "arguments" text not null, "status" text not null, "result_json" text, "started_at" text not null, "completed_at" text, constraint "tool_effects_pk" primary key ("run_id", "step", "position"))`
  }
  for (const view of VIEWS) {
    const columns = view.columns.map((c) => `"${c}"`).join(', ')
    await sql.raw(`create table "${view.name}_table" ${tables[view.name]} without rowid`).execute(db)
    await sql.raw(`insert into "${view.name}_table" (${columns}) select ${columns} from "${view.name}"`).execute(db)
  }
  // `transitions` reads `journal_entries`: a rename would not parse it while that name is missing.
  await sql`drop view "transitions"`.execute(db)
  for (const view of VIEWS) await sql.raw(`drop view "${view.name}"`).execute(db)
  await sql`drop table "run_log"`.execute(db)
  for (const view of VIEWS) await sql.raw(`alter table "${view.name}_table" rename to "${view.name}"`).execute(db)
  // As 2026-12-01T120000-compact-journal created it.
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
