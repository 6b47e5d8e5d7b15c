import { type Kysely, PostgresAdapter, sql } from 'kysely'
import { COMMIT_FUNCTION, DELETE_STEP_ROWS, TRANSITIONS_VIEW } from './2026-12-05T000000-postgres-plain-tables.js'

// Frozen: this file is the schema as it was on 2026-12-05. Later changes are new migrations.
//
// PostgreSQL only, and only for a new store: the whole schema at once, the one a store made by the
// earlier chain has after 2026-12-05T000000-postgres-plain-tables (a test holds the two equal). A
// new store records this migration alone; an older one walks the chain (migrations/index.ts).
// docs/durability.md, "How a run is stored", says what each table holds.
//
// - Every text column compares byte-wise (`collate "C"`), as SQLite's do, so ids and ISO
//   timestamps sort the same on both dialects whatever the database's locale; epoch
//   milliseconds and fencing tokens are `bigint`.
// - A run's status and a receipt's reason and outcome are domains: a table CHECK is re-planned at
//   every statement that writes its table, a domain's once per connection. A new status is an
//   `alter domain ... add constraint` (no view depends on them).
// - `steps`, `attempts` and `journal_entries` have no foreign key to `runs`: the run writer's fence
//   reads the run's row locked in the very statement that writes them, and the repositories check
//   the run for any other writer (repositories/run-rows.ts); a trigger deletes them with their run.
// - `transitions` is a read-only view of `journal_entries`, one row per transition.
// - `agentvisor_commit` writes a step's commit: the rows it writes, as records (see
//   2026-12-05T000000-postgres-plain-tables, which makes the same function).

const SCHEMA = [
  `create domain agentvisor_run_status as text collate "C" constraint runs_status_check
     check (value in ('running', 'awaiting_approval', 'awaiting_input', 'succeeded', 'step_cap', 'failed', 'cancelled', 'timed_out'))`,
  `create domain agentvisor_attempt_reason as text collate "C" constraint attempts_reason_check check (value in ('initial', 'retry', 'fallover'))`,
  `create domain agentvisor_attempt_outcome as text collate "C" constraint attempts_outcome_check
     check (value in ('pending', 'ok', 'failed', 'unknown', 'cancelled'))`,
  `create table runs (
     id text collate "C" primary key,
     parent_id text collate "C" references runs (id),
     status agentvisor_run_status not null,
     goal text collate "C" not null,
     state text collate "C" not null,
     steps integer not null default 0,
     error_json text collate "C",
     created_at text collate "C" not null,
     updated_at text collate "C" not null,
     ended_at text collate "C",
     lease_owner text collate "C",
     lease_expires_at bigint,
     lease_token bigint not null default 0,
     cancel_requested_at text collate "C",
     root_id text collate "C",
     usage_json text collate "C",
     forked_from_run text collate "C",
     forked_from_seq integer
   )`,
  'create index runs_status_idx on runs (status, created_at)',
  'create index runs_parent_id_idx on runs (parent_id)',
  'create index runs_created_at_idx on runs (created_at, id)',
  'create index runs_root_id_idx on runs (root_id)',
  'create index runs_forked_from on runs (forked_from_run)',
  `create table run_contracts (
     run_id text collate "C" primary key references runs (id) on delete cascade,
     contract_json text collate "C" not null
   )`,
  `create table steps (
     run_id text collate "C" not null,
     step integer not null,
     provider text collate "C" not null,
     prompt_summary text collate "C" not null default '',
     text text collate "C" not null default '',
     tool_calls_json text collate "C" not null default '[]',
     results_json text collate "C",
     feedback text collate "C",
     tokens_in integer not null default 0,
     tokens_out integer not null default 0,
     at text collate "C" not null,
     constraint steps_pk primary key (run_id, step)
   )`,
  `create table attempts (
     run_id text collate "C" not null,
     step integer not null,
     attempt integer not null,
     provider text collate "C" not null,
     reason agentvisor_attempt_reason not null,
     outcome agentvisor_attempt_outcome not null default 'pending',
     error_kind text collate "C",
     http_status integer,
     error_message text collate "C",
     latency_ms bigint,
     ttft_ms bigint,
     tokens_in integer,
     tokens_out integer,
     partial_text text collate "C",
     started_at text collate "C" not null,
     settled_at text collate "C",
     constraint attempts_pk primary key (run_id, step, attempt)
   )`,
  `create table journal_entries (
     run_id text collate "C" not null,
     seq integer not null,
     first_seq integer not null,
     transitions_json text collate "C" not null,
     snapshot_json text collate "C" not null,
     constraint journal_entries_pk primary key (run_id, seq)
   )`,
  TRANSITIONS_VIEW,
  `create table approvals (
     id text collate "C" primary key,
     run_id text collate "C" not null references runs (id) on delete cascade,
     step integer not null,
     tool_call_id text collate "C" not null,
     position integer not null default 0,
     kind text collate "C" not null default 'policy',
     act text collate "C" not null,
     target text collate "C" not null,
     payload_json text collate "C" not null,
     rule text collate "C" not null,
     layer text collate "C" not null,
     status text collate "C" not null default 'pending',
     source text collate "C",
     remember integer not null default 0,
     edited_payload_json text collate "C",
     created_at text collate "C" not null,
     decided_at text collate "C",
     resolution text collate "C",
     account text collate "C",
     constraint approvals_status_check check (status in ('pending', 'approved', 'denied')),
     constraint approvals_call_unique unique (run_id, step, tool_call_id)
   )`,
  'create index approvals_run_status_idx on approvals (run_id, status)',
  `create table policy_events (
     id bigint generated by default as identity primary key,
     run_id text collate "C" not null references runs (id) on delete cascade,
     step integer not null,
     kind text collate "C" not null,
     act text collate "C" not null,
     target text collate "C" not null,
     rule text collate "C" not null,
     layer text collate "C" not null,
     decision text collate "C" not null,
     source text collate "C" not null,
     request_id text collate "C",
     performed_target text collate "C",
     at text collate "C" not null,
     constraint policy_events_kind_check check (kind in ('refusal', 'decision'))
   )`,
  'create index policy_events_run_idx on policy_events (run_id, id)',
  `create table remembered_rules (
     workspace text collate "C" not null,
     act text collate "C" not null,
     pattern text collate "C" not null,
     decision text collate "C" not null,
     run_id text collate "C",
     created_at text collate "C" not null,
     constraint remembered_rules_pk primary key (workspace, act, pattern),
     constraint remembered_rules_decision_check check (decision in ('allow', 'deny'))
   )`,
  `create table tool_effects (
     run_id text collate "C" not null references runs (id) on delete cascade,
     step integer not null,
     position integer not null,
     tool_call_id text collate "C" not null,
     name text collate "C" not null,
     arguments text collate "C" not null,
     status text collate "C" not null,
     result_json text collate "C",
     started_at text collate "C" not null,
     completed_at text collate "C",
     constraint tool_effects_pk primary key (run_id, step, position)
   )`,
  DELETE_STEP_ROWS,
  'create trigger runs_delete_step_rows before delete on runs for each row execute function agentvisor_delete_step_rows()',
  ...COMMIT_FUNCTION
]

const isPostgres = (db: Kysely<any>): boolean => db.getExecutor().adapter instanceof PostgresAdapter

export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) throw new Error('2026-12-05T000000-postgres-baseline is for PostgreSQL only')
  for (const statement of SCHEMA) await sql.raw(statement).execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop function agentvisor_commit(agentvisor_fence, attempts, steps, attempts, journal_entries)`.execute(db)
  await sql`drop table tool_effects, remembered_rules, policy_events, approvals, run_contracts, steps, attempts, journal_entries, runs cascade`.execute(db)
  await sql`drop function agentvisor_delete_step_rows()`.execute(db)
  await sql`drop type agentvisor_fence`.execute(db)
  await sql`drop domain agentvisor_run_status, agentvisor_attempt_reason, agentvisor_attempt_outcome`.execute(db)
}
