import { type Kysely, PostgresAdapter, sql } from 'kysely'

/**
 * PostgreSQL only: the server-side half of the PostgreSQL run writer
 * (`postgres/postgres-run-writer.ts`), so that a driver's commit is one statement, one round
 * trip, instead of a transaction of a dozen. Each function takes its writes as one `jsonb`
 * argument whose text values the writer has already escaped (text-codec.ts), and applies them
 * exactly as the repository function of the same name does (`applyRunWrite`): a key the row
 * does not have takes the column's default, as an INSERT that leaves the column out would.
 *
 * - `agentvisor_apply_writes(writes)`: writes, in order (a jsonb array).
 * - `agentvisor_commit(c)`: the run's head updated under its fencing token (the fence and the
 *   row lock in one statement), then every write, then the transitions.
 * - `agentvisor_write(run_id, lease_token, writes)`: fenced writes outside a transition.
 * - `agentvisor_settle_pending(run_id, lease_token, outcome, at)`: the run's pending receipts
 *   settled, fenced; returns how many.
 *
 * A superseded driver's call raises SQLSTATE `AVL01`, which the writer reports as a lost lease;
 * the statement's transaction rolls back whole, so it writes nothing. On SQLite this migration
 * does nothing. Frozen: later changes are new migrations (`create or replace`).
 */
const FUNCTIONS = `
create function agentvisor_apply_writes(writes jsonb) returns void language plpgsql as $fn$
declare
  w jsonb;
begin
  -- In order: a later write may touch a row an earlier one made (a step, then its results).
  for w in select jsonb_array_elements(writes) loop
    case w->>'op'
    when 'insertAttempt' then
      insert into attempts select * from jsonb_populate_record(null::attempts, (w->'row') || '{"outcome": "pending", "settled_at": null}');
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
    when 'setStepResults' then
      update steps set results_json = w->>'resultsJson' where run_id = w->>'runId' and step = (w->>'step')::integer;
    when 'setStepFeedback' then
      update steps set feedback = w->>'feedback' where run_id = w->>'runId' and step = (w->>'step')::integer;
    when 'insertApproval' then
      insert into approvals select * from jsonb_populate_record(null::approvals,
        '{"position": 0, "kind": "policy", "status": "pending", "remember": 0}' || (w->'row'))
        on conflict (run_id, step, tool_call_id) do nothing;
    when 'insertPolicyEvents' then
      -- The audit's ids come from its identity, in the order of the rows.
      insert into policy_events (run_id, step, kind, act, target, rule, layer, decision, source, request_id, performed_target, at)
      select e.run_id, e.step, e.kind, e.act, e.target, e.rule, e.layer, e.decision, e.source, e.request_id, e.performed_target, e.at
        from jsonb_array_elements(w->'rows') with ordinality as r(value, n), jsonb_populate_record(null::policy_events, r.value) e
       order by r.n;
    when 'insertRun' then
      insert into runs select * from jsonb_populate_record(null::runs, '{"steps": 0, "lease_token": 0}' || ((w->'row') - 'contract_json'));
      insert into run_contracts (run_id, contract_json) values (w->'row'->>'id', w->'row'->>'contract_json');
    when 'startToolEffect' then
      insert into tool_effects select * from jsonb_populate_record(null::tool_effects,
        (w->'row') || '{"status": "started", "result_json": null, "completed_at": null}')
        on conflict (run_id, step, position) do update
        set status = excluded.status, name = excluded.name, arguments = excluded.arguments, started_at = excluded.started_at, result_json = null, completed_at = null;
    when 'completeToolEffect' then
      update tool_effects set status = 'completed', result_json = w->>'resultJson', completed_at = w->>'at'
       where run_id = w->>'runId' and step = (w->>'step')::integer and position = (w->>'position')::integer;
    else
      raise exception 'agentvisor_apply_writes: unknown write %', w->>'op';
    end case;
  end loop;
end
$fn$;

create function agentvisor_commit(c jsonb) returns void language plpgsql as $fn$
begin
  -- The fence and the head in one statement: a superseded driver's token matches no row.
  update runs
     set status = coalesce(c->'head'->>'status', status), state = c->'head'->>'state', steps = (c->'head'->>'steps')::integer,
         updated_at = c->'head'->>'updated_at', error_json = c->'head'->>'error_json', ended_at = c->'head'->>'ended_at'
   where id = c->>'runId' and lease_token = (c->>'leaseToken')::bigint;
  if not found then
    raise exception using errcode = 'AVL01', message = 'lease lost: ' || (c->>'runId');
  end if;
  perform agentvisor_apply_writes(c->'writes');
  -- The commit's journal entry: its transitions and the one snapshot (docs/durability.md, "The journal").
  insert into journal_entries select * from jsonb_populate_record(null::journal_entries, c->'entry');
end
$fn$;

create function agentvisor_write(run_id text, lease_token bigint, writes jsonb) returns void language plpgsql as $fn$
begin
  -- The row lock an UPDATE of the run would take: a takeover waits for this commit, or this
  -- waits for the takeover and then finds the new token.
  perform 1 from runs r where r.id = agentvisor_write.run_id and r.lease_token = agentvisor_write.lease_token for no key update;
  if not found then
    raise exception using errcode = 'AVL01', message = 'lease lost: ' || agentvisor_write.run_id;
  end if;
  perform agentvisor_apply_writes(writes);
end
$fn$;

create function agentvisor_settle_pending(run_id text, lease_token bigint, outcome text, at text) returns integer language plpgsql as $fn$
declare
  settled integer;
begin
  perform 1 from runs r where r.id = agentvisor_settle_pending.run_id and r.lease_token = agentvisor_settle_pending.lease_token for no key update;
  if not found then
    raise exception using errcode = 'AVL01', message = 'lease lost: ' || agentvisor_settle_pending.run_id;
  end if;
  update attempts a set outcome = agentvisor_settle_pending.outcome, settled_at = agentvisor_settle_pending.at
   where a.run_id = agentvisor_settle_pending.run_id and a.outcome = 'pending';
  get diagnostics settled = row_count;
  return settled;
end
$fn$;
`

const isPostgres = (db: Kysely<any>): boolean => db.getExecutor().adapter instanceof PostgresAdapter

export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  // One statement per function: a query with parameters (the migrator's) cannot hold several.
  for (const statement of FUNCTIONS.trim().split(/\n(?=create function )/)) await sql.raw(statement).execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  for (const signature of [
    'agentvisor_settle_pending(text, bigint, text, text)',
    'agentvisor_write(text, bigint, jsonb)',
    'agentvisor_commit(jsonb)',
    'agentvisor_apply_writes(jsonb)'
  ]) {
    await sql.raw(`drop function ${signature}`).execute(db)
  }
}
