import { type Kysely, PostgresAdapter, sql } from 'kysely'

/**
 * PostgreSQL only: a second `agentvisor_commit`, the one the PostgreSQL run writer
 * (`postgres/postgres-run-writer.ts`) calls since this migration, with the commit in typed
 * arguments instead of one `jsonb` document. Measured on the bench's server, it costs the
 * server less per commit than `agentvisor_commit(jsonb)` of `2026-12-01T130000-postgres-run-writer`:
 *
 * - The head and the journal entry are plain arguments: the entry's transitions and snapshot
 *   (about half a commit's bytes) are no longer parsed into `jsonb` at every call, nor taken
 *   apart again with `->>`; only the writes stay one `jsonb` array.
 * - The writes are walked by index (`writes->i`, an expression PL/pgSQL evaluates without the
 *   executor) instead of through a `SELECT jsonb_array_elements(...)` cursor, and the three
 *   writes of every step (`settleAttempt`, `insertStep`, `insertAttempt`) run here instead of in
 *   a nested call of `agentvisor_apply_writes`. Any other write goes to that function, one at a
 *   time and in order, so there is one definition of what each of them does.
 *
 * The statements are those of `agentvisor_apply_writes` and `agentvisor_commit(jsonb)`, with
 * the same meaning: the fence and the head in one UPDATE, SQLSTATE `AVL01` for a superseded
 * driver (the statement's transaction rolls back whole), every write in order, the entry last.
 * `agentvisor_commit(jsonb)` stays: a host not yet upgraded keeps calling it. On SQLite this
 * migration does nothing. Frozen: later changes are new migrations (`create or replace`).
 */
const COMMIT = `
create function agentvisor_commit(
  run_id text, lease_token bigint,
  status text, state text, steps integer, updated_at text, error_json text, ended_at text,
  writes jsonb,
  seq integer, first_seq integer, transitions_json text, snapshot_json text
) returns void language plpgsql as $fn$
declare
  w jsonb;
  i integer;
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
  -- In order: a later write may touch a row an earlier one made (a receipt, then its settlement).
  for i in 0 .. jsonb_array_length(writes) - 1 loop
    w := writes->i;
    case w->>'op'
    when 'settleAttempt' then
      -- The patch over the current row: a column the patch leaves out keeps its value.
      update attempts a
         set (outcome, error_kind, http_status, error_message, latency_ms, ttft_ms, tokens_in, tokens_out, partial_text, settled_at) =
             (select p.outcome, p.error_kind, p.http_status, p.error_message, p.latency_ms, p.ttft_ms, p.tokens_in, p.tokens_out, p.partial_text, p.settled_at
                from jsonb_populate_record(a, w->'patch') p)
       where a.run_id = w->>'runId' and a.step = (w->>'step')::integer and a.attempt = (w->>'attempt')::integer and a.outcome = 'pending';
    when 'insertStep' then
      insert into steps select * from jsonb_populate_record(null::steps,
        '{"prompt_summary": "", "text": "", "tool_calls_json": "[]", "tokens_in": 0, "tokens_out": 0}' || (w->'row'));
    when 'insertAttempt' then
      insert into attempts select * from jsonb_populate_record(null::attempts, (w->'row') || '{"outcome": "pending", "settled_at": null}');
    else
      perform agentvisor_apply_writes(jsonb_build_array(w));
    end case;
  end loop;
  -- The commit's journal entry: its transitions and the one snapshot (docs/durability.md, "The journal").
  insert into journal_entries (run_id, seq, first_seq, transitions_json, snapshot_json)
  values (agentvisor_commit.run_id, agentvisor_commit.seq, agentvisor_commit.first_seq, agentvisor_commit.transitions_json, agentvisor_commit.snapshot_json);
end
$fn$
`

const SIGNATURE = 'agentvisor_commit(text, bigint, text, text, integer, text, text, text, jsonb, integer, integer, text, text)'

const isPostgres = (db: Kysely<any>): boolean => db.getExecutor().adapter instanceof PostgresAdapter

export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  await sql.raw(COMMIT).execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  await sql.raw(`drop function ${SIGNATURE}`).execute(db)
}
