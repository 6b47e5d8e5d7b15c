import { type Kysely, PostgresAdapter, sql } from 'kysely'

// Frozen: this file is the schema as it was on 2026-12-05. Later changes are new migrations.
//
// SQLite only, and only for a new store: the whole schema at once, the one a store made by the
// chain has after its last migration (2026-12-05T000000; a test holds the two equal, object by
// object). A new store records this migration alone; an older one walks the chain
// (migrations/index.ts). docs/durability.md, "How a run is stored", says what each table holds.
//
// - `runs` is a run's head (status, state, steps, lease), `run_contracts` its contract.
// - `run_log` holds a run's per-step rows, one table kept in commit order: `kind` `a` a receipt (`n`
//   its attempt), `s` a step (`n` 0), `j` a journal entry (`n` its seq; `step` the run's steps
//   after its commit, plus one), `t` a tool effect (`n` its position). The run writer writes it
//   directly (sqlite/sqlite-commits.ts); measured against four plain tables in docs/benchmarks.md,
//   "Storage layout A/B".
// - `attempts`, `steps`, `journal_entries` and `tool_effects` are views of `run_log` with the
//   columns those tables had; their INSTEAD OF triggers write through them for every other writer
//   (the repositories), with the defaults the tables had. `transitions` is a read-only view of the
//   journal, one row per transition.
// - The CHECKs compare with `=`: SQLite evaluates an IN list of three or more through a temporary
//   index built at each statement (2026-12-01T160000). `runs.status` keeps its values in the order
//   the chain gave them (`awaiting_input` last, 2026-12-02T090000).

const SCHEMA = [
  `create table "runs" (
     "id" text primary key,
     "parent_id" text references "runs" ("id"),
     "status" text not null,
     "goal" text not null,
     "state" text not null,
     "steps" integer default 0 not null,
     "error_json" text,
     "created_at" text not null,
     "updated_at" text not null,
     "ended_at" text,
     "lease_owner" text,
     "lease_expires_at" integer,
     "lease_token" integer default 0 not null,
     "cancel_requested_at" text,
     "root_id" text,
     "usage_json" text,
     "forked_from_run" text,
     "forked_from_seq" integer,
     constraint "runs_status_check" check (status in ('running', 'awaiting_approval', 'succeeded', 'step_cap', 'failed', 'cancelled', 'timed_out', 'awaiting_input'))
   )`,
  'create index "runs_status_idx" on "runs" ("status", "created_at")',
  'create index "runs_parent_id_idx" on "runs" ("parent_id")',
  'create index "runs_created_at_idx" on "runs" ("created_at", "id")',
  'create index "runs_root_id_idx" on "runs" ("root_id")',
  'create index "runs_forked_from" on "runs" ("forked_from_run")',
  `create table "run_contracts" (
     "run_id" text primary key references "runs" ("id") on delete cascade,
     "contract_json" text not null
   )`,
  `create table "approvals" (
     "id" text primary key,
     "run_id" text not null references "runs" ("id") on delete cascade,
     "step" integer not null,
     "tool_call_id" text not null,
     "position" integer default 0 not null,
     "kind" text default 'policy' not null,
     "act" text not null,
     "target" text not null,
     "payload_json" text not null,
     "rule" text not null,
     "layer" text not null,
     "status" text default 'pending' not null,
     "source" text,
     "remember" integer default 0 not null,
     "edited_payload_json" text,
     "created_at" text not null,
     "decided_at" text,
     "resolution" text,
     "account" text,
     constraint "approvals_status_check" check (status in ('pending', 'approved', 'denied')),
     constraint "approvals_call_unique" unique ("run_id", "step", "tool_call_id")
   )`,
  'create index "approvals_run_status_idx" on "approvals" ("run_id", "status")',
  `create table "policy_events" (
     "id" integer primary key autoincrement,
     "run_id" text not null references "runs" ("id") on delete cascade,
     "step" integer not null,
     "kind" text not null,
     "act" text not null,
     "target" text not null,
     "rule" text not null,
     "layer" text not null,
     "decision" text not null,
     "source" text not null,
     "request_id" text,
     "performed_target" text,
     "at" text not null,
     constraint "policy_events_kind_check" check (kind in ('refusal', 'decision'))
   )`,
  'create index "policy_events_run_idx" on "policy_events" ("run_id", "id")',
  `create table "remembered_rules" (
     "workspace" text not null,
     "act" text not null,
     "pattern" text not null,
     "decision" text not null,
     "run_id" text,
     "created_at" text not null,
     constraint "remembered_rules_pk" primary key ("workspace", "act", "pattern"),
     constraint "remembered_rules_decision_check" check (decision in ('allow', 'deny'))
   )`,
  `create table "run_log" (
     "id" integer primary key,
     "run_id" text not null references "runs" ("id") on delete cascade,
     "step" integer not null,
     "kind" text not null,
     "n" integer not null,
     "provider" text, "reason" text, "outcome" text, "error_kind" text, "http_status" integer, "error_message" text, "latency_ms" integer, "ttft_ms" integer,
     "tokens_in" integer, "tokens_out" integer, "partial_text" text, "started_at" text, "settled_at" text,
     "prompt_summary" text, "text" text, "tool_calls_json" text, "results_json" text, "feedback" text, "at" text,
     "first_seq" integer, "transitions_json" text, "snapshot_json" text,
     "tool_call_id" text, "name" text, "arguments" text, "status" text, "result_json" text, "completed_at" text,
     constraint "run_log_kind_check" check ("kind" = 'a' or "kind" = 's' or "kind" = 'j' or "kind" = 't'),
     constraint "run_log_attempt_check" check ("kind" <> 'a' or ("provider" is not null and "started_at" is not null
       and ("reason" = 'initial' or "reason" = 'retry' or "reason" = 'fallover')
       and ("outcome" = 'pending' or "outcome" = 'ok' or "outcome" = 'failed' or "outcome" = 'unknown' or "outcome" = 'cancelled'))),
     constraint "run_log_step_check" check ("kind" <> 's' or ("n" = 0 and "provider" is not null and "prompt_summary" is not null and "text" is not null
       and "tool_calls_json" is not null and "tokens_in" is not null and "tokens_out" is not null and "at" is not null)),
     constraint "run_log_entry_check" check ("kind" <> 'j' or ("first_seq" is not null and "transitions_json" is not null and "snapshot_json" is not null)),
     constraint "run_log_effect_check" check ("kind" <> 't' or ("tool_call_id" is not null and "name" is not null and "arguments" is not null
       and "status" is not null and "started_at" is not null))
   )`,
  'create unique index "run_log_key" on "run_log" ("run_id", "step", "kind", "n")',

  // Receipts: `kind` a, `n` the attempt.
  `create view "attempts" as
     select "run_id", "step", "n" as "attempt", "provider", "reason", "outcome", "error_kind", "http_status", "error_message", "latency_ms", "ttft_ms",
       "tokens_in", "tokens_out", "partial_text", "started_at", "settled_at"
     from "run_log" where "kind" = 'a'`,
  `create trigger "attempts_insert" instead of insert on "attempts" begin
     insert into "run_log" ("run_id", "step", "kind", "n", "provider", "reason", "outcome", "error_kind", "http_status", "error_message", "latency_ms", "ttft_ms",
       "tokens_in", "tokens_out", "partial_text", "started_at", "settled_at")
     values (new."run_id", new."step", 'a', new."attempt", new."provider", new."reason", coalesce(new."outcome", 'pending'), new."error_kind", new."http_status",
       new."error_message", new."latency_ms", new."ttft_ms", new."tokens_in", new."tokens_out", new."partial_text", new."started_at", new."settled_at");
   end`,
  `create trigger "attempts_update" instead of update on "attempts" begin
     update "run_log" set "run_id" = new."run_id", "step" = new."step", "n" = new."attempt", "provider" = new."provider", "reason" = new."reason",
       "outcome" = new."outcome", "error_kind" = new."error_kind", "http_status" = new."http_status", "error_message" = new."error_message",
       "latency_ms" = new."latency_ms", "ttft_ms" = new."ttft_ms", "tokens_in" = new."tokens_in", "tokens_out" = new."tokens_out",
       "partial_text" = new."partial_text", "started_at" = new."started_at", "settled_at" = new."settled_at"
     where "run_id" = old."run_id" and "step" = old."step" and "kind" = 'a' and "n" = old."attempt";
   end`,
  `create trigger "attempts_delete" instead of delete on "attempts" begin
     delete from "run_log" where "run_id" = old."run_id" and "step" = old."step" and "kind" = 'a' and "n" = old."attempt";
   end`,

  // Steps: `kind` s, `n` 0.
  `create view "steps" as
     select "run_id", "step", "provider", "prompt_summary", "text", "tool_calls_json", "results_json", "feedback", "tokens_in", "tokens_out", "at"
     from "run_log" where "kind" = 's'`,
  `create trigger "steps_insert" instead of insert on "steps" begin
     insert into "run_log" ("run_id", "step", "kind", "n", "provider", "prompt_summary", "text", "tool_calls_json", "results_json", "feedback", "tokens_in", "tokens_out", "at")
     values (new."run_id", new."step", 's', 0, new."provider", coalesce(new."prompt_summary", ''), coalesce(new."text", ''), coalesce(new."tool_calls_json", '[]'),
       new."results_json", new."feedback", coalesce(new."tokens_in", 0), coalesce(new."tokens_out", 0), new."at");
   end`,
  `create trigger "steps_update" instead of update on "steps" begin
     update "run_log" set "run_id" = new."run_id", "step" = new."step", "provider" = new."provider", "prompt_summary" = new."prompt_summary", "text" = new."text",
       "tool_calls_json" = new."tool_calls_json", "results_json" = new."results_json", "feedback" = new."feedback", "tokens_in" = new."tokens_in",
       "tokens_out" = new."tokens_out", "at" = new."at"
     where "run_id" = old."run_id" and "step" = old."step" and "kind" = 's' and "n" = 0;
   end`,
  `create trigger "steps_delete" instead of delete on "steps" begin
     delete from "run_log" where "run_id" = old."run_id" and "step" = old."step" and "kind" = 's' and "n" = 0;
   end`,

  // Journal entries: `kind` j, `n` the seq, `step` where the run's next rows go (never less than an
  // earlier entry's); an entry's seq is unique in its run whatever its step.
  `create view "journal_entries" as
     select "run_id", "n" as "seq", "first_seq", "transitions_json", "snapshot_json" from "run_log" where "kind" = 'j'`,
  `create trigger "journal_entries_insert" instead of insert on "journal_entries" begin
     select raise(abort, 'UNIQUE constraint failed: journal_entries.run_id, journal_entries.seq')
       where exists (select 1 from "run_log" where "run_id" = new."run_id" and "kind" = 'j' and "n" = new."seq");
     insert into "run_log" ("run_id", "step", "kind", "n", "first_seq", "transitions_json", "snapshot_json")
     values (new."run_id",
       max(coalesce((select "steps" from "runs" where "id" = new."run_id"), 0) + 1,
         coalesce((select "step" from "run_log" where "run_id" = new."run_id" and "kind" = 'j' order by "step" desc, "kind" desc, "n" desc limit 1), 0)),
       'j', new."seq", new."first_seq", new."transitions_json", new."snapshot_json");
   end`,
  `create trigger "journal_entries_update" instead of update on "journal_entries" begin
     update "run_log" set "run_id" = new."run_id", "n" = new."seq", "first_seq" = new."first_seq", "transitions_json" = new."transitions_json",
       "snapshot_json" = new."snapshot_json"
     where "run_id" = old."run_id" and "kind" = 'j' and "n" = old."seq";
   end`,
  `create trigger "journal_entries_delete" instead of delete on "journal_entries" begin
     delete from "run_log" where "run_id" = old."run_id" and "kind" = 'j' and "n" = old."seq";
   end`,
  `create view "transitions" as
     select e."run_id" as "run_id",
       json_extract(t.value, '$.seq') as "seq",
       json_extract(t.value, '$.from') as "from_state",
       json_extract(t.value, '$.event.type') as "event",
       json_extract(t.value, '$.to') as "to_state",
       case when json_extract(t.value, '$.seq') = e."seq" then e."snapshot_json" end as "snapshot_json",
       json_extract(t.value, '$.at') as "at"
     from "journal_entries" e, json_each(e."transitions_json") t`,

  // Tool effects: `kind` t, `n` the position.
  `create view "tool_effects" as
     select "run_id", "step", "n" as "position", "tool_call_id", "name", "arguments", "status", "result_json", "started_at", "completed_at"
     from "run_log" where "kind" = 't'`,
  `create trigger "tool_effects_insert" instead of insert on "tool_effects" begin
     insert into "run_log" ("run_id", "step", "kind", "n", "tool_call_id", "name", "arguments", "status", "result_json", "started_at", "completed_at")
     values (new."run_id", new."step", 't', new."position", new."tool_call_id", new."name", new."arguments", new."status", new."result_json", new."started_at",
       new."completed_at");
   end`,
  `create trigger "tool_effects_update" instead of update on "tool_effects" begin
     update "run_log" set "run_id" = new."run_id", "step" = new."step", "n" = new."position", "tool_call_id" = new."tool_call_id", "name" = new."name",
       "arguments" = new."arguments", "status" = new."status", "result_json" = new."result_json", "started_at" = new."started_at",
       "completed_at" = new."completed_at"
     where "run_id" = old."run_id" and "step" = old."step" and "kind" = 't' and "n" = old."position";
   end`,
  `create trigger "tool_effects_delete" instead of delete on "tool_effects" begin
     delete from "run_log" where "run_id" = old."run_id" and "step" = old."step" and "kind" = 't' and "n" = old."position";
   end`
]

const isPostgres = (db: Kysely<any>): boolean => db.getExecutor().adapter instanceof PostgresAdapter

export async function up(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) throw new Error('2026-12-05T000000-sqlite-baseline is for SQLite only')
  for (const statement of SCHEMA) await sql.raw(statement).execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const view of ['transitions', 'tool_effects', 'journal_entries', 'steps', 'attempts']) await sql.raw(`drop view "${view}"`).execute(db)
  for (const table of ['run_log', 'remembered_rules', 'policy_events', 'approvals', 'run_contracts', 'runs']) await sql.raw(`drop table "${table}"`).execute(db)
}
