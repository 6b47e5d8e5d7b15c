import { type Kysely, PostgresAdapter, sql } from 'kysely'

// Frozen: this file is the schema and the functions as they were on 2026-12-02. Later changes are
// new migrations.
//
// PostgreSQL only: the answered receipt's settlement is carried by its step row. A step's commit
// settled the receipt of the call that answered (an UPDATE: the row found by its key, a new
// version of it written) and inserted the step row, for the same step, in the same statement.
// The UPDATE was ~6-12% of a step and 30-50 µs of the server's CPU (docs/benchmarks.md, "The hot
// path"). Now the step row names the answering attempt and holds what the settlement set (when,
// latency, time to first token, tokens), and the receipt's own row stays as it was written,
// `pending`.
//
// - The receipts' table is `attempt_rows` and the steps' `step_rows`, which gains the answer's
//   columns (`answer_attempt`, `answer_settled_at`, `answer_latency_ms`, `answer_ttft_ms`,
//   `answer_tokens_in`, `answer_tokens_out`). `steps` is a view of `step_rows` with the columns it
//   had (PostgreSQL writes through it as through the table). `attempts` is a view of
//   `attempt_rows` that reads a `pending` receipt named by its step's `answer_attempt` as the
//   settlement made it: `ok`, each column the settlement gave over the receipt's own (a column it
//   left null keeps the receipt's value, as the UPDATE's `coalesce` did). Every reader of
//   `attempts` and `steps` reads exactly what it read before.
// - The view takes inserts, updates and deletes (an INSTEAD OF trigger writes them to
//   `attempt_rows`), so every writer through Kysely or `agentvisor_apply_writes` works as
//   before. An update of a receipt the view reads as settled writes the view's values, so a
//   receipt settled by its step row is never settled again: `outcome = 'pending'` does not match
//   it in the view.
// - The commit functions fold a settlement into the step row when the commit settles a receipt
//   `ok` with no error and no partial text and inserts the step row of the same step; otherwise
//   they settle as before. `agentvisor_settle_pending` (recovery, a run's end) settles only the
//   receipts the view reads as pending. The delete trigger of `runs` deletes from `attempt_rows`.
//
// Stores written before this migration keep their settled rows as they are. On SQLite this
// migration does nothing: a receipt there is a row of `run_log`, whose settlement is an update of
// one row in the same B-tree page as the step's.

const ANSWER_COLUMNS = [
  ['answer_attempt', 'integer'],
  ['answer_settled_at', 'text collate "C"'],
  ['answer_latency_ms', 'bigint'],
  ['answer_ttft_ms', 'bigint'],
  ['answer_tokens_in', 'integer'],
  ['answer_tokens_out', 'integer']
] as const

/** The columns of `steps` before this migration, in their order: the view's. */
const STEP_COLUMNS = 'run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at'

const VIEW = `
create view attempts as
  select a.run_id, a.step, a.attempt, a.provider, a.reason,
         case when s.run_id is null then a.outcome else 'ok'::agentvisor_attempt_outcome end as outcome,
         a.error_kind, a.http_status, a.error_message,
         coalesce(s.answer_latency_ms, a.latency_ms) as latency_ms, coalesce(s.answer_ttft_ms, a.ttft_ms) as ttft_ms,
         coalesce(s.answer_tokens_in, a.tokens_in) as tokens_in, coalesce(s.answer_tokens_out, a.tokens_out) as tokens_out,
         a.partial_text, a.started_at, coalesce(s.answer_settled_at, a.settled_at) as settled_at
    from attempt_rows a
    left join step_rows s on a.outcome = 'pending' and s.run_id = a.run_id and s.step = a.step and s.answer_attempt = a.attempt`

const VIEW_WRITES = `
create function agentvisor_attempts_write() returns trigger language plpgsql as $fn$
begin
  if tg_op = 'INSERT' then
    insert into attempt_rows values (new.*);
    return new;
  elsif tg_op = 'UPDATE' then
    -- The view's row as the writer left it: a receipt settled by its step row is written settled.
    update attempt_rows a
       set run_id = new.run_id, step = new.step, attempt = new.attempt, provider = new.provider, reason = new.reason, outcome = new.outcome,
           error_kind = new.error_kind, http_status = new.http_status, error_message = new.error_message, latency_ms = new.latency_ms,
           ttft_ms = new.ttft_ms, tokens_in = new.tokens_in, tokens_out = new.tokens_out, partial_text = new.partial_text,
           started_at = new.started_at, settled_at = new.settled_at
     where a.run_id = old.run_id and a.step = old.step and a.attempt = old.attempt;
    return new;
  end if;
  delete from attempt_rows a where a.run_id = old.run_id and a.step = old.step and a.attempt = old.attempt;
  return old;
end
$fn$`

/** `agentvisor_settle_pending` (2026-12-01T130000), settling only what the view reads as pending. */
const settlePending = (folding: boolean): string => `
create or replace function agentvisor_settle_pending(run_id text, lease_token bigint, outcome text, at text) returns integer language plpgsql as $fn$
declare
  settled integer;
begin
  perform 1 from runs r where r.id = agentvisor_settle_pending.run_id and r.lease_token = agentvisor_settle_pending.lease_token for no key update;
  if not found then
    raise exception using errcode = 'AVL01', message = 'lease lost: ' || agentvisor_settle_pending.run_id;
  end if;
  update ${folding ? 'attempt_rows' : 'attempts'} a set outcome = agentvisor_settle_pending.outcome, settled_at = agentvisor_settle_pending.at
   where a.run_id = agentvisor_settle_pending.run_id and a.outcome = 'pending'${
     folding ? '\n     and not exists (select 1 from step_rows s where s.run_id = a.run_id and s.step = a.step and s.answer_attempt = a.attempt)' : ''
   };
  get diagnostics settled = row_count;
  return settled;
end
$fn$`

/** The trigger function of 2026-12-02T160000, on the receipts' table. */
const deleteRows = (folding: boolean): string => `
create or replace function agentvisor_delete_step_rows() returns trigger language plpgsql as $fn$
begin
  delete from ${folding ? 'attempt_rows' : 'attempts'} where run_id = old.id;
  delete from ${folding ? 'step_rows' : 'steps'} where run_id = old.id;
  delete from journal_entries where run_id = old.id;
  return old;
end
$fn$`

/** Every function this migration replaces, as it makes it or, `folding` false, as it found it. */
const functions = (folding: boolean): ReadonlyArray<string> => [
  settlePending(folding),
  deleteRows(folding),
  commitFunction('agentvisor_commit', COMMIT_FENCE, folding),
  commitFunction('agentvisor_commit_deferred', DEFERRED_FENCE, folding)
]

/**
 * `agentvisor_commit` (2026-12-01T170000) or `agentvisor_commit_deferred` (2026-12-02T010000)
 * with the same arguments and fence, folding an answered receipt's settlement into its step row;
 * or, `folding` false, exactly as those migrations made it (this migration's `down`).
 */
const commitFunction = (name: string, fence: string, folding: boolean): string => {
  const receipts = folding ? 'attempt_rows' : 'attempts'
  const declare = folding
    ? `declare
  -- The answer's settlement, carried by the step row of the same step (the migration says why).
  answered boolean := coalesce(step_step = settle_step and settle_outcome = 'ok' and settle_error_kind is null
    and settle_http_status is null and settle_error_message is null and settle_partial_text is null, false);
`
    : ''
  const settled = folding ? `settle_step is not null and not answered` : 'settle_step is not null'
  const unanswered = folding
    ? `\n       and not exists (select 1 from step_rows s where s.run_id = a.run_id and s.step = a.step and s.answer_attempt = a.attempt)`
    : ''
  const stepInsert = folding
    ? `insert into step_rows (run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at,
                           answer_attempt, answer_settled_at, answer_latency_ms, answer_ttft_ms, answer_tokens_in, answer_tokens_out)
    values (${name}.run_id, step_step, step_provider, step_prompt_summary, step_text, step_tool_calls_json, step_results_json, step_feedback,
            step_tokens_in, step_tokens_out, step_at,
            case when answered then settle_attempt end, case when answered then settle_settled_at end,
            case when answered then settle_latency_ms end, case when answered then settle_ttft_ms end,
            case when answered then settle_tokens_in end, case when answered then settle_tokens_out end);`
    : `insert into steps (run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at)
    values (${name}.run_id, step_step, step_provider, step_prompt_summary, step_text, step_tool_calls_json, step_results_json, step_feedback,
            step_tokens_in, step_tokens_out, step_at);`
  return `
create or replace function ${name}(
  run_id text, lease_token bigint,
  status text, state text, steps integer, updated_at text, error_json text, ended_at text,
  settle_step integer, settle_attempt integer, settle_outcome text, settle_settled_at text, settle_error_kind text, settle_http_status integer,
  settle_error_message text, settle_latency_ms bigint, settle_ttft_ms bigint, settle_tokens_in integer, settle_tokens_out integer, settle_partial_text text,
  step_step integer, step_provider text, step_prompt_summary text, step_text text, step_tool_calls_json text, step_results_json text, step_feedback text,
  step_tokens_in integer, step_tokens_out integer, step_at text,
  next_step integer, next_attempt integer, next_provider text, next_reason text, next_error_kind text, next_http_status integer, next_error_message text,
  next_latency_ms bigint, next_ttft_ms bigint, next_tokens_in integer, next_tokens_out integer, next_partial_text text, next_started_at text,
  writes jsonb,
  seq integer, first_seq integer, transitions_json text, snapshot_json text
) returns void language plpgsql as $fn$
${declare}begin
${fence}
  -- The receipt this commit settles (unless its step row carries it): a column the settlement
  -- leaves null keeps its value.
  if ${settled} then
    update ${receipts} a
       set outcome = settle_outcome, settled_at = settle_settled_at,
           error_kind = coalesce(settle_error_kind, a.error_kind), http_status = coalesce(settle_http_status, a.http_status),
           error_message = coalesce(settle_error_message, a.error_message), latency_ms = coalesce(settle_latency_ms, a.latency_ms),
           ttft_ms = coalesce(settle_ttft_ms, a.ttft_ms), tokens_in = coalesce(settle_tokens_in, a.tokens_in),
           tokens_out = coalesce(settle_tokens_out, a.tokens_out), partial_text = coalesce(settle_partial_text, a.partial_text)
     where a.run_id = ${name}.run_id and a.step = settle_step and a.attempt = settle_attempt and a.outcome = 'pending'${unanswered};
  end if;
  if step_step is not null then
    ${stepInsert}
  end if;
  if next_step is not null then
    insert into ${receipts} (run_id, step, attempt, provider, reason, outcome, error_kind, http_status, error_message, latency_ms, ttft_ms,
                          tokens_in, tokens_out, partial_text, started_at, settled_at)
    values (${name}.run_id, next_step, next_attempt, next_provider, next_reason, 'pending', next_error_kind, next_http_status, next_error_message,
            next_latency_ms, next_ttft_ms, next_tokens_in, next_tokens_out, next_partial_text, next_started_at, null);
  end if;
  -- Any other write, in order, as agentvisor_apply_writes (2026-12-01T130000) defines it.
  if writes is not null then
    perform agentvisor_apply_writes(writes);
  end if;
  -- The commit's journal entry: its transitions and the one snapshot (docs/durability.md, "The journal").
  insert into journal_entries (run_id, seq, first_seq, transitions_json, snapshot_json)
  values (${name}.run_id, ${name}.seq, ${name}.first_seq, ${name}.transitions_json, ${name}.snapshot_json);
end
$fn$`
}

const COMMIT_FENCE = `  -- The fence and the head in one statement: a superseded driver's token matches no row. A null
  -- status is one that did not change (the driver leaves the indexed column alone).
  update runs r
     set status = coalesce(agentvisor_commit.status, r.status), state = agentvisor_commit.state, steps = agentvisor_commit.steps,
         updated_at = agentvisor_commit.updated_at, error_json = agentvisor_commit.error_json, ended_at = agentvisor_commit.ended_at
   where r.id = agentvisor_commit.run_id and r.lease_token = agentvisor_commit.lease_token;
  if not found then
    raise exception using errcode = 'AVL01', message = 'lease lost: ' || agentvisor_commit.run_id;
  end if;`

const DEFERRED_FENCE = `  -- The fence alone: the run's row locked as the head's UPDATE would lock it, and left as it is
  -- (docs/durability.md, "The run's row").
  perform 1 from runs r
    where r.id = agentvisor_commit_deferred.run_id and r.lease_token = agentvisor_commit_deferred.lease_token
    for no key update;
  if not found then
    raise exception using errcode = 'AVL01', message = 'lease lost: ' || agentvisor_commit_deferred.run_id;
  end if;`

const isPostgres = (db: Kysely<any>): boolean => db.getExecutor().adapter instanceof PostgresAdapter

export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  await sql`alter table attempts rename to attempt_rows`.execute(db)
  await sql`alter table steps rename to step_rows`.execute(db)
  for (const [column, type] of ANSWER_COLUMNS) await sql.raw(`alter table step_rows add column ${column} ${type}`).execute(db)
  await sql.raw(`create view steps as select ${STEP_COLUMNS} from step_rows`).execute(db)
  await sql.raw(VIEW).execute(db)
  await sql.raw(VIEW_WRITES).execute(db)
  await sql`create trigger attempts_write instead of insert or update or delete on attempts for each row execute function agentvisor_attempts_write()`.execute(
    db
  )
  for (const statement of functions(true)) await sql.raw(statement).execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  // Every receipt as the view reads it, back into one table, and the functions as they were.
  await sql`create table attempts_settled as select * from attempts`.execute(db)
  await sql`drop view attempts`.execute(db)
  await sql`drop function agentvisor_attempts_write()`.execute(db)
  await sql`update attempt_rows a set outcome = s.outcome, latency_ms = s.latency_ms, ttft_ms = s.ttft_ms, tokens_in = s.tokens_in, tokens_out = s.tokens_out, settled_at = s.settled_at
              from attempts_settled s where s.run_id = a.run_id and s.step = a.step and s.attempt = a.attempt`.execute(db)
  await sql`drop table attempts_settled`.execute(db)
  await sql`alter table attempt_rows rename to attempts`.execute(db)
  await sql`drop view steps`.execute(db)
  for (const [column] of ANSWER_COLUMNS) await sql.raw(`alter table step_rows drop column ${column}`).execute(db)
  await sql`alter table step_rows rename to steps`.execute(db)
  for (const statement of functions(false)) await sql.raw(statement).execute(db)
}
