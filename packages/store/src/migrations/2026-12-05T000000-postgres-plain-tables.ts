import { type Kysely, PostgresAdapter, sql } from 'kysely'
import * as postgresRunWriter from './2026-12-01T130000-postgres-run-writer.js'
import * as postgresCommitArguments from './2026-12-01T150000-postgres-commit-arguments.js'
import * as postgresStepRows from './2026-12-02T200000-postgres-step-rows.js'

// Frozen: this file is the schema as it was on 2026-12-05. Later changes are new migrations.
//
// PostgreSQL only: a store made by the migrations before this one goes to the layout a new store
// gets at once (2026-12-05T000000-postgres-baseline; docs/durability.md, "How a run is stored"):
// `steps`, `attempts` and `journal_entries` are plain tables again, written by plain statements;
// no view is written through, no INSTEAD OF trigger, no function a writer calls. Decided by an A/B
// of the two layouts at the bench's step (docs/benchmarks.md, "Storage layout A/B").
//
// - The receipts and entries that step rows carried (2026-12-02T200000) become rows of their own,
//   exactly as the views read them; the step rows lose the carried columns.
// - Every function of the commit path goes (`agentvisor_commit` in its three forms,
//   `agentvisor_commit_deferred`, `agentvisor_apply_writes`, `agentvisor_write`,
//   `agentvisor_settle_pending`, the views' trigger functions) but one: `agentvisor_commit(fence,
//   settled, step, next, entry)`, a step's commit, which takes the rows it writes as records
//   (COMMIT_FUNCTION below). Any other write is a plain statement (postgres/postgres-statement.ts).
//   A host of the previous release refuses a store migrated past what it knows, so nothing calls
//   the old functions any more.
// - What stays: the status, reason and outcome rules as domains (a table CHECK is re-planned at every
//   statement that writes its table), no foreign key from a step's tables to `runs` (the commit's
//   fence proves the run exists: 2026-12-02T160000) and the trigger on `runs` that deletes a run's
//   step rows with it, now over the tables.
//
// On SQLite this migration does nothing: its layout is the lead's to change (`run_log`).

const ATTEMPT_COLUMNS =
  'run_id, step, attempt, provider, reason, outcome, error_kind, http_status, error_message, latency_ms, ttft_ms, tokens_in, tokens_out, partial_text, started_at, settled_at'
const ENTRY_COLUMNS = 'run_id, seq, first_seq, transitions_json, snapshot_json'

/** The columns 2026-12-02T200000 added to the step rows. */
const CARRIED = [
  'answer_attempt',
  'answer_settled_at',
  'answer_latency_ms',
  'answer_ttft_ms',
  'answer_tokens_in',
  'answer_tokens_out',
  'next_step',
  'next_attempt',
  'next_provider',
  'next_reason',
  'next_started_at',
  'entry_seq',
  'entry_first_seq',
  'entry_transitions_json',
  'entry_snapshot_json'
]

/** Every function of the commit path the earlier migrations installed, by signature. */
const FUNCTIONS = [
  'agentvisor_commit(jsonb)',
  'agentvisor_commit(text, bigint, text, text, integer, text, text, text, jsonb, integer, integer, text, text)',
  `agentvisor_commit(text, bigint, text, text, integer, text, text, text, integer, integer, text, text, text, integer, text, bigint, bigint, integer, integer, text,
    integer, text, text, text, text, text, text, integer, integer, text, integer, integer, text, text, text, integer, text, bigint, bigint, integer, integer, text, text,
    jsonb, integer, integer, text, text)`,
  `agentvisor_commit_deferred(text, bigint, text, text, integer, text, text, text, integer, integer, text, text, text, integer, text, bigint, bigint, integer, integer, text,
    integer, text, text, text, text, text, text, integer, integer, text, integer, integer, text, text, text, integer, text, bigint, bigint, integer, integer, text, text,
    jsonb, integer, integer, text, text)`,
  'agentvisor_write(text, bigint, jsonb)',
  'agentvisor_settle_pending(text, bigint, text, text)',
  'agentvisor_apply_writes(jsonb)',
  'agentvisor_attempts_write()',
  'agentvisor_journal_write()'
]

/** The view of 2026-12-01T120000, made again over the table (a view keeps the relation it was made over). */
export const TRANSITIONS_VIEW = `
create view transitions as
  select e.run_id,
    (t.value ->> 'seq')::integer as seq,
    (t.value ->> 'from') collate "C" as from_state,
    (t.value -> 'event' ->> 'type') collate "C" as event,
    (t.value ->> 'to') collate "C" as to_state,
    case when (t.value ->> 'seq')::integer = e.seq then e.snapshot_json end as snapshot_json,
    (t.value ->> 'at') collate "C" as at
  from journal_entries e cross join lateral jsonb_array_elements(e.transitions_json::jsonb) as t(value)`

/**
 * A step's commit, the one function of the commit path (docs/durability.md, "How a run is stored"):
 * it takes the rows it writes as records of the tables' own row types, each null when the commit
 * has no such write, and `fence`, the run's head with the lease token (`agentvisor_fence`). The
 * fence first (the head's UPDATE under the token, or with `deferred` a read of the run's row under
 * the lock that UPDATE takes), then the answering receipt settled in place (a column the
 * settlement leaves null keeps its value; a settled receipt is never settled again), the step, the
 * next receipt, the journal entry. False, having written nothing, for a superseded driver.
 * Measured against the same statements as one SQL statement of CTEs: ~85 µs less server CPU a
 * commit (docs/benchmarks.md, "Storage layout A/B").
 */
export const COMMIT_FUNCTION = [
  `create type agentvisor_fence as (run_id text, lease_token bigint, deferred boolean, status text, state text, steps integer, updated_at text,
     error_json text, ended_at text)`,
  `create function agentvisor_commit(fence agentvisor_fence, settled attempts, step steps, next attempts, entry journal_entries)
   returns boolean language plpgsql as $fn$
begin
  if (fence).deferred then
    perform 1 from runs r where r.id = (fence).run_id and r.lease_token = (fence).lease_token for no key update;
  else
    -- A null status is one that did not change (the indexed column is left alone).
    update runs r
       set status = coalesce((fence).status, r.status), state = (fence).state, steps = (fence).steps, updated_at = (fence).updated_at,
           error_json = (fence).error_json, ended_at = (fence).ended_at
     where r.id = (fence).run_id and r.lease_token = (fence).lease_token;
  end if;
  if not found then
    return false;
  end if;
  if (settled).run_id is not null then
    update attempts a
       set outcome = (settled).outcome, settled_at = (settled).settled_at,
           error_kind = coalesce((settled).error_kind, a.error_kind), http_status = coalesce((settled).http_status, a.http_status),
           error_message = coalesce((settled).error_message, a.error_message), latency_ms = coalesce((settled).latency_ms, a.latency_ms),
           ttft_ms = coalesce((settled).ttft_ms, a.ttft_ms), tokens_in = coalesce((settled).tokens_in, a.tokens_in),
           tokens_out = coalesce((settled).tokens_out, a.tokens_out), partial_text = coalesce((settled).partial_text, a.partial_text)
     where a.run_id = (settled).run_id and a.step = (settled).step and a.attempt = (settled).attempt and a.outcome = 'pending';
  end if;
  if (step).run_id is not null then
    insert into steps select (step).*;
  end if;
  if (next).run_id is not null then
    insert into attempts select (next).*;
  end if;
  if (entry).run_id is not null then
    insert into journal_entries select (entry).*;
  end if;
  return true;
end
$fn$`
]

/** What the keys' ON DELETE CASCADE did for a step's tables (2026-12-02T160000). */
export const DELETE_STEP_ROWS = `
create or replace function agentvisor_delete_step_rows() returns trigger language plpgsql as $fn$
begin
  delete from attempts where run_id = old.id;
  delete from steps where run_id = old.id;
  delete from journal_entries where run_id = old.id;
  return old;
end
$fn$`

const isPostgres = (db: Kysely<any>): boolean => db.getExecutor().adapter instanceof PostgresAdapter

export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  const statements = [
    // Every receipt and entry as the views read them, carried or not.
    'create temporary table carried_attempts on commit drop as select * from attempts',
    'create temporary table carried_entries on commit drop as select * from journal_entries',
    'drop view transitions',
    'drop view journal_entries',
    'drop view attempts',
    'drop view steps',
    ...FUNCTIONS.map((signature) => `drop function ${signature}`),
    'delete from attempt_rows',
    `insert into attempt_rows (${ATTEMPT_COLUMNS}) select ${ATTEMPT_COLUMNS} from carried_attempts`,
    'delete from journal_rows',
    `insert into journal_rows (${ENTRY_COLUMNS}) select ${ENTRY_COLUMNS} from carried_entries`,
    `alter table step_rows ${CARRIED.map((column) => `drop column ${column}`).join(', ')}`,
    'alter table step_rows rename to steps',
    'alter table attempt_rows rename to attempts',
    'alter table journal_rows rename to journal_entries',
    TRANSITIONS_VIEW,
    DELETE_STEP_ROWS,
    ...COMMIT_FUNCTION
  ]
  for (const statement of statements) await sql.raw(statement).execute(db)
}

/**
 * Back to the packed layout: the functions as the frozen migrations made them, then the step rows
 * and views of 2026-12-02T200000 (whose `create or replace` makes the 48-argument commit functions
 * too). The receipts and entries stay rows of their own, which the views read as they are.
 */
export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  await sql`drop function agentvisor_commit(agentvisor_fence, attempts, steps, attempts, journal_entries)`.execute(db)
  await sql`drop type agentvisor_fence`.execute(db)
  await postgresRunWriter.up(db)
  await postgresCommitArguments.up(db)
  await postgresStepRows.up(db)
}
