import { type Kysely, PostgresAdapter, sql } from 'kysely'

// Frozen: this file is the schema and the functions as they were on 2026-12-01. Later changes are
// new migrations.
//
// PostgreSQL only: what a step's commit costs the server, cut where it was measured to go (a
// profile of the backend over 1,000 commits of the bench's `list_dir` run, and the server's CPU
// per commit with each change alone, in the change that added this file). The rows, their
// columns and every reader stay as they were.
//
// - A third `agentvisor_commit`, whose arguments are the columns of the writes every step makes:
//   the receipt it settles, the step row, the next receipt (each argument group null when the
//   commit has no such write), then any other writes as the `jsonb` array of the 2026-12-01T150000
//   function (null when there are none), then the journal entry. Each of the three is one plain
//   statement of parameters: no `jsonb` is parsed at the call nor taken apart by
//   `jsonb_populate_record` per write (about a quarter of the server's time per commit). The run
//   writer (`postgres/postgres-run-writer.ts`) sends the writes in these groups only when they
//   come in this order, first in the commit: the function applies them first, then the array, so
//   the order of every write is the commit's. A settled receipt keeps a column the settlement
//   does not give (null), as the SQLite writer's does.
// - The CHECKs on `runs.status`, `attempts.reason` and `attempts.outcome` become domains with the
//   same rule and the same constraint names. PostgreSQL reads a table CHECK's stored expression
//   back from text and plans it again at every statement that writes the table (a tenth of a
//   commit, for the five it evaluated); a domain's is planned once per connection. A bad value
//   still fails with SQLSTATE 23514 naming the constraint; a client sees the columns as `text`
//   (PostgreSQL describes a domain column by its base type).
// - `attempts_pending_idx` (run_id, outcome) goes, as it went on SQLite (2026-11-29T210000):
//   settling a receipt changed an indexed column, so every settlement wrote a new entry in both
//   of the table's indexes, and every receipt one in each. A run's pending receipts are found
//   from the primary key's `run_id` prefix instead, when a run is resumed or ended.
//
// The earlier functions stay: a host not yet upgraded keeps calling them, and they write through
// the domains as they wrote through the CHECKs. On SQLite this migration does nothing.

const DOMAINS: ReadonlyArray<{ readonly table: string; readonly column: string; readonly domain: string; readonly check: string; readonly values: string }> = [
  {
    table: 'runs',
    column: 'status',
    domain: 'agentvisor_run_status',
    check: 'runs_status_check',
    values: `'running', 'awaiting_approval', 'succeeded', 'step_cap', 'failed', 'cancelled', 'timed_out'`
  },
  { table: 'attempts', column: 'reason', domain: 'agentvisor_attempt_reason', check: 'attempts_reason_check', values: `'initial', 'retry', 'fallover'` },
  {
    table: 'attempts',
    column: 'outcome',
    domain: 'agentvisor_attempt_outcome',
    check: 'attempts_outcome_check',
    values: `'pending', 'ok', 'failed', 'unknown', 'cancelled'`
  }
]

const COMMIT = `
create function agentvisor_commit(
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
begin
  -- The fence and the head in one statement: a superseded driver's token matches no row. A null
  -- status is one that did not change (the driver leaves the indexed column alone).
  update runs r
     set status = coalesce(agentvisor_commit.status, r.status), state = agentvisor_commit.state, steps = agentvisor_commit.steps,
         updated_at = agentvisor_commit.updated_at, error_json = agentvisor_commit.error_json, ended_at = agentvisor_commit.ended_at
   where r.id = agentvisor_commit.run_id and r.lease_token = agentvisor_commit.lease_token;
  if not found then
    raise exception using errcode = 'AVL01', message = 'lease lost: ' || agentvisor_commit.run_id;
  end if;
  -- The receipt this commit settles: a column the settlement leaves null keeps its value.
  if settle_step is not null then
    update attempts a
       set outcome = settle_outcome, settled_at = settle_settled_at,
           error_kind = coalesce(settle_error_kind, a.error_kind), http_status = coalesce(settle_http_status, a.http_status),
           error_message = coalesce(settle_error_message, a.error_message), latency_ms = coalesce(settle_latency_ms, a.latency_ms),
           ttft_ms = coalesce(settle_ttft_ms, a.ttft_ms), tokens_in = coalesce(settle_tokens_in, a.tokens_in),
           tokens_out = coalesce(settle_tokens_out, a.tokens_out), partial_text = coalesce(settle_partial_text, a.partial_text)
     where a.run_id = agentvisor_commit.run_id and a.step = settle_step and a.attempt = settle_attempt and a.outcome = 'pending';
  end if;
  if step_step is not null then
    insert into steps (run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at)
    values (agentvisor_commit.run_id, step_step, step_provider, step_prompt_summary, step_text, step_tool_calls_json, step_results_json, step_feedback,
            step_tokens_in, step_tokens_out, step_at);
  end if;
  if next_step is not null then
    insert into attempts (run_id, step, attempt, provider, reason, outcome, error_kind, http_status, error_message, latency_ms, ttft_ms,
                          tokens_in, tokens_out, partial_text, started_at, settled_at)
    values (agentvisor_commit.run_id, next_step, next_attempt, next_provider, next_reason, 'pending', next_error_kind, next_http_status, next_error_message,
            next_latency_ms, next_ttft_ms, next_tokens_in, next_tokens_out, next_partial_text, next_started_at, null);
  end if;
  -- Any other write, in order, as agentvisor_apply_writes (2026-12-01T130000) defines it.
  if writes is not null then
    perform agentvisor_apply_writes(writes);
  end if;
  -- The commit's journal entry: its transitions and the one snapshot (docs/durability.md, "The journal").
  insert into journal_entries (run_id, seq, first_seq, transitions_json, snapshot_json)
  values (agentvisor_commit.run_id, agentvisor_commit.seq, agentvisor_commit.first_seq, agentvisor_commit.transitions_json, agentvisor_commit.snapshot_json);
end
$fn$
`

const SIGNATURE = `agentvisor_commit(text, bigint, text, text, integer, text, text, text,
  integer, integer, text, text, text, integer, text, bigint, bigint, integer, integer, text,
  integer, text, text, text, text, text, text, integer, integer, text,
  integer, integer, text, text, text, integer, text, bigint, bigint, integer, integer, text, text,
  jsonb, integer, integer, text, text)`

const isPostgres = (db: Kysely<any>): boolean => db.getExecutor().adapter instanceof PostgresAdapter

export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  for (const d of DOMAINS) {
    await sql.raw(`create domain ${d.domain} as text collate "C" constraint ${d.check} check (value in (${d.values}))`).execute(db)
    await sql.raw(`alter table ${d.table} drop constraint ${d.check}`).execute(db)
    await sql.raw(`alter table ${d.table} alter column ${d.column} type ${d.domain}`).execute(db)
  }
  await sql`drop index attempts_pending_idx`.execute(db)
  await sql.raw(COMMIT).execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  await sql.raw(`drop function ${SIGNATURE}`).execute(db)
  await sql`create index attempts_pending_idx on attempts (run_id, outcome)`.execute(db)
  for (const d of [...DOMAINS].reverse()) {
    await sql.raw(`alter table ${d.table} alter column ${d.column} type text collate "C"`).execute(db)
    await sql.raw(`drop domain ${d.domain}`).execute(db)
    await sql.raw(`alter table ${d.table} add constraint ${d.check} check (${d.column} in (${d.values}))`).execute(db)
  }
}
