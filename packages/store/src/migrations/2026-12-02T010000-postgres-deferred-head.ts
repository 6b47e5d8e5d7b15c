import { type Kysely, PostgresAdapter, sql } from 'kysely'

// Frozen: this file is the schema and the functions as they were on 2026-12-02. Later changes are
// new migrations.
//
// PostgreSQL only: `agentvisor_commit_deferred`, the commit of 2026-12-01T170000 for a commit that
// leaves the run's row for a later refresh, as the SQLite writer has done since 2026-12-01
// (docs/durability.md, "The run's row"): the same 48 arguments, the same writes in the same order,
// and instead of the head's UPDATE, the fence as a read of the run's row under the lock that UPDATE
// would take (`for no key update`): a takeover waits for the commit, a superseded driver's commit
// raises AVL01 and writes nothing. The row gets no new version at each step, nor its indexes an
// entry. The run writer calls it only for such a commit; the earlier functions stay. On SQLite
// this migration does nothing.

const COMMIT_DEFERRED = `
create function agentvisor_commit_deferred(
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
  -- The fence alone: the run's row locked as the head's UPDATE would lock it against a takeover
  -- (a lease is taken by an UPDATE of the row), and left as it is. The head's arguments are not
  -- read: the run writer refreshes the row later (docs/durability.md, "The run's row").
  perform 1 from runs r
    where r.id = agentvisor_commit_deferred.run_id and r.lease_token = agentvisor_commit_deferred.lease_token
    for no key update;
  if not found then
    raise exception using errcode = 'AVL01', message = 'lease lost: ' || agentvisor_commit_deferred.run_id;
  end if;
  -- The receipt this commit settles: a column the settlement leaves null keeps its value.
  if settle_step is not null then
    update attempts a
       set outcome = settle_outcome, settled_at = settle_settled_at,
           error_kind = coalesce(settle_error_kind, a.error_kind), http_status = coalesce(settle_http_status, a.http_status),
           error_message = coalesce(settle_error_message, a.error_message), latency_ms = coalesce(settle_latency_ms, a.latency_ms),
           ttft_ms = coalesce(settle_ttft_ms, a.ttft_ms), tokens_in = coalesce(settle_tokens_in, a.tokens_in),
           tokens_out = coalesce(settle_tokens_out, a.tokens_out), partial_text = coalesce(settle_partial_text, a.partial_text)
     where a.run_id = agentvisor_commit_deferred.run_id and a.step = settle_step and a.attempt = settle_attempt and a.outcome = 'pending';
  end if;
  if step_step is not null then
    insert into steps (run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at)
    values (agentvisor_commit_deferred.run_id, step_step, step_provider, step_prompt_summary, step_text, step_tool_calls_json, step_results_json, step_feedback,
            step_tokens_in, step_tokens_out, step_at);
  end if;
  if next_step is not null then
    insert into attempts (run_id, step, attempt, provider, reason, outcome, error_kind, http_status, error_message, latency_ms, ttft_ms,
                          tokens_in, tokens_out, partial_text, started_at, settled_at)
    values (agentvisor_commit_deferred.run_id, next_step, next_attempt, next_provider, next_reason, 'pending', next_error_kind, next_http_status, next_error_message,
            next_latency_ms, next_ttft_ms, next_tokens_in, next_tokens_out, next_partial_text, next_started_at, null);
  end if;
  -- Any other write, in order, as agentvisor_apply_writes (2026-12-01T130000) defines it.
  if writes is not null then
    perform agentvisor_apply_writes(writes);
  end if;
  -- The commit's journal entry: its transitions and the one snapshot (docs/durability.md, "The journal").
  insert into journal_entries (run_id, seq, first_seq, transitions_json, snapshot_json)
  values (agentvisor_commit_deferred.run_id, agentvisor_commit_deferred.seq, agentvisor_commit_deferred.first_seq, agentvisor_commit_deferred.transitions_json, agentvisor_commit_deferred.snapshot_json);
end
$fn$
`

const SIGNATURE = `agentvisor_commit_deferred(text, bigint, text, text, integer, text, text, text,
  integer, integer, text, text, text, integer, text, bigint, bigint, integer, integer, text,
  integer, text, text, text, text, text, text, integer, integer, text,
  integer, integer, text, text, text, integer, text, bigint, bigint, integer, integer, text, text,
  jsonb, integer, integer, text, text)`

const isPostgres = (db: Kysely<any>): boolean => db.getExecutor().adapter instanceof PostgresAdapter

export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  await sql.raw(COMMIT_DEFERRED).execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  await sql.raw(`drop function ${SIGNATURE}`).execute(db)
}
