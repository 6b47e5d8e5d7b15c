import { type Kysely, PostgresAdapter, sql } from 'kysely'

// Frozen: this file is the schema and the functions as they were on 2026-12-02. Later changes are
// new migrations.
//
// PostgreSQL only: a step's commit writes one row. The commit of a step that answered settled the
// answering receipt (an UPDATE: the row found by its key, a new version of it written), inserted
// the step row, the next step's receipt and the commit's journal entry: four rows, four index
// entries. Measured (docs/benchmarks.md, "The hot path"): the UPDATE ~7-12% of a step, the two
// inserts ~15% more, in the server's CPU ~20-60 µs each. Now the step row carries all of it:
//
// - `answer_*`: what the answering receipt's settlement set (its attempt, when, latency, time to
//   first token, tokens). The receipt's own row stays as written, `pending`.
// - `next_*`: the next step's receipt as written before its dispatch (step, attempt, provider,
//   reason, when), when it is the following step's and has nothing else yet known.
// - `entry_*`: the commit's journal entry (seq, first seq, transitions, snapshot).
//
// The tables are `step_rows`, `attempt_rows` and `journal_rows`; `steps`, `attempts` and
// `journal_entries` are views of them with the columns the tables had, so every reader reads
// exactly what it read before:
//
// - `steps`: the step rows' own columns (PostgreSQL writes through it as through a table).
// - `attempts`: the receipts' rows and the receipts carried by step rows, a `pending` one named by
//   its step row's `answer_attempt` read as the settlement made it (`ok`; each column the
//   settlement gave over the receipt's own, as the UPDATE's `coalesce` did).
// - `journal_entries`: the entries' rows and the entries carried by step rows; `transitions` is
//   made again over it.
//
// `attempts` and `journal_entries` take inserts, updates and deletes (INSTEAD OF triggers): an
// insert goes to the table of its own; a carried row that is changed or deleted leaves its step
// row first. A receipt the view reads as settled is written settled by an update, so a receipt
// settled by its step row is never settled again (`outcome = 'pending'` does not match it). The
// commit functions carry what a step's commit writes as above and write everything else as
// before; a settlement that is not an answer goes through the view. `agentvisor_settle_pending`
// settles what the view reads as pending, wherever it is kept; the delete trigger of `runs`
// deletes from the three tables.
//
// Stores written before this migration keep their rows as they are. On SQLite this migration does
// nothing: a step's rows there are rows of one table (`run_log`) in the same B-tree pages.

/** The columns the step rows gain: name and type. */
const STEP_ROW_COLUMNS = [
  ['answer_attempt', 'integer'],
  ['answer_settled_at', 'text collate "C"'],
  ['answer_latency_ms', 'bigint'],
  ['answer_ttft_ms', 'bigint'],
  ['answer_tokens_in', 'integer'],
  ['answer_tokens_out', 'integer'],
  ['next_step', 'integer'],
  ['next_attempt', 'integer'],
  ['next_provider', 'text collate "C"'],
  ['next_reason', 'agentvisor_attempt_reason'],
  ['next_started_at', 'text collate "C"'],
  ['entry_seq', 'integer'],
  ['entry_first_seq', 'integer'],
  ['entry_transitions_json', 'text collate "C"'],
  ['entry_snapshot_json', 'text collate "C"']
] as const

/** What a carried row leaves behind in its step row: its columns (`next_` or `entry_`) set to null. */
const cleared = (prefix: 'next_' | 'entry_'): string =>
  STEP_ROW_COLUMNS.filter(([column]) => column.startsWith(prefix))
    .map(([column]) => `${column} = null`)
    .join(', ')

/** The columns of each table before this migration, in their order: its view's. */
const STEP_COLUMNS = 'run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at'
const ATTEMPT_COLUMNS =
  'run_id, step, attempt, provider, reason, outcome, error_kind, http_status, error_message, latency_ms, ttft_ms, tokens_in, tokens_out, partial_text, started_at, settled_at'
const ENTRY_COLUMNS = 'run_id, seq, first_seq, transitions_json, snapshot_json'

const STEPS_VIEW = `create view steps as select ${STEP_COLUMNS} from step_rows`

const ATTEMPTS_VIEW = `
create view attempts as
  select r.run_id, r.step, r.attempt, r.provider, r.reason,
         case when s.run_id is null then r.outcome else 'ok'::agentvisor_attempt_outcome end as outcome,
         r.error_kind, r.http_status, r.error_message,
         coalesce(s.answer_latency_ms, r.latency_ms) as latency_ms, coalesce(s.answer_ttft_ms, r.ttft_ms) as ttft_ms,
         coalesce(s.answer_tokens_in, r.tokens_in) as tokens_in, coalesce(s.answer_tokens_out, r.tokens_out) as tokens_out,
         r.partial_text, r.started_at, coalesce(s.answer_settled_at, r.settled_at) as settled_at
    from (
      select ${ATTEMPT_COLUMNS} from attempt_rows
      union all
      select c.run_id, c.next_step, c.next_attempt, c.next_provider, c.next_reason, 'pending'::agentvisor_attempt_outcome, null, null, null, null, null,
             null, null, null, c.next_started_at, null
        from step_rows c where c.next_step is not null
    ) r
    left join step_rows s on r.outcome = 'pending' and s.run_id = r.run_id and s.step = r.step and s.answer_attempt = r.attempt`

const JOURNAL_VIEW = `
create view journal_entries as
  select ${ENTRY_COLUMNS} from journal_rows
  union all
  select c.run_id, c.entry_seq, c.entry_first_seq, c.entry_transitions_json, c.entry_snapshot_json from step_rows c where c.entry_seq is not null`

/** The view of 2026-12-01T120000, made again over `journal_entries` (a view keeps the table it was made over). */
const TRANSITIONS_VIEW = `
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
 * The INSTEAD OF trigger function of a view over `table` and the rows step rows carry: an insert
 * goes to `table` (after `refuse`, when given, finds nothing); a carried row that is updated or
 * deleted first leaves its step row (`leave`, the step row's columns set to null, `carriedAt`
 * finding it), for a row of its own as the writer left it.
 */
const viewWrites = (name: string, table: string, columns: string, key: ReadonlyArray<string>, leave: string, carriedAt: string, refuse?: string): string => `
create function ${name}() returns trigger language plpgsql as $fn$
begin
  if tg_op = 'INSERT' then${
    refuse === undefined
      ? ''
      : `
    if exists (select 1 from step_rows c where ${refuse}) then
      raise exception using errcode = '23505', message = 'duplicate key value violates unique constraint "attempts_pk"';
    end if;`
  }
    insert into ${table} values (new.*);
    return new;
  end if;
  update step_rows c set ${leave} where ${carriedAt};
  if found then
    if tg_op = 'UPDATE' then
      insert into ${table} values (new.*);
      return new;
    end if;
    return old;
  end if;
  if tg_op = 'UPDATE' then
    update ${table} t set ${columns
      .split(', ')
      .map((column) => `${column} = new.${column}`)
      .join(', ')}
     where ${key.map((column) => `t.${column} = old.${column}`).join(' and ')};
    return new;
  end if;
  delete from ${table} t where ${key.map((column) => `t.${column} = old.${column}`).join(' and ')};
  return old;
end
$fn$`

// A receipt is carried only by the row of the step before its own (the commit functions'
// `carried`), so a carried receipt is found by that row's key.
const ATTEMPTS_WRITE = viewWrites(
  'agentvisor_attempts_write',
  'attempt_rows',
  ATTEMPT_COLUMNS,
  ['run_id', 'step', 'attempt'],
  cleared('next_'),
  'c.run_id = old.run_id and c.step = old.step - 1 and c.next_step = old.step and c.next_attempt = old.attempt',
  'c.run_id = new.run_id and c.step = new.step - 1 and c.next_step = new.step and c.next_attempt = new.attempt'
)

const JOURNAL_WRITE = viewWrites(
  'agentvisor_journal_write',
  'journal_rows',
  ENTRY_COLUMNS,
  ['run_id', 'seq'],
  cleared('entry_'),
  'c.run_id = old.run_id and c.entry_seq = old.seq'
)

/** Whether a step row names the receipt (`run`, `step`, `attempt`: SQL expressions) as its answer. */
const ANSWERED = (run: string, step: string, attempt: string): string =>
  `exists (select 1 from step_rows s where s.run_id = ${run} and s.step = ${step} and s.answer_attempt = ${attempt})`

/** `agentvisor_settle_pending` (2026-12-01T130000), or, `folding`, of what the view reads as pending wherever it is kept. */
const settlePending = (folding: boolean): string => `
create or replace function agentvisor_settle_pending(run_id text, lease_token bigint, outcome text, at text) returns integer language plpgsql as $fn$
declare
  settled integer;
  moved integer := 0;
begin
  perform 1 from runs r where r.id = agentvisor_settle_pending.run_id and r.lease_token = agentvisor_settle_pending.lease_token for no key update;
  if not found then
    raise exception using errcode = 'AVL01', message = 'lease lost: ' || agentvisor_settle_pending.run_id;
  end if;
  update ${folding ? 'attempt_rows' : 'attempts'} a set outcome = agentvisor_settle_pending.outcome, settled_at = agentvisor_settle_pending.at
   where a.run_id = agentvisor_settle_pending.run_id and a.outcome = 'pending'${folding ? `\n     and not ${ANSWERED('a.run_id', 'a.step', 'a.attempt')}` : ''};
  get diagnostics settled = row_count;${
    folding
      ? `
  -- The receipts carried by step rows and never answered: settled into rows of their own.
  insert into attempt_rows (run_id, step, attempt, provider, reason, outcome, started_at, settled_at)
  select c.run_id, c.next_step, c.next_attempt, c.next_provider, c.next_reason, agentvisor_settle_pending.outcome, c.next_started_at, agentvisor_settle_pending.at
    from step_rows c
   where c.run_id = agentvisor_settle_pending.run_id and c.next_step is not null and not ${ANSWERED('c.run_id', 'c.next_step', 'c.next_attempt')};
  get diagnostics moved = row_count;
  if moved > 0 then
    update step_rows c set ${cleared('next_')}
     where c.run_id = agentvisor_settle_pending.run_id and c.next_step is not null and not ${ANSWERED('c.run_id', 'c.next_step', 'c.next_attempt')};
  end if;`
      : ''
  }
  return settled + moved;
end
$fn$`

/** The trigger function of 2026-12-02T160000, on the tables the rows are kept in. */
const deleteRows = (folding: boolean): string => `
create or replace function agentvisor_delete_step_rows() returns trigger language plpgsql as $fn$
begin
  delete from ${folding ? 'attempt_rows' : 'attempts'} where run_id = old.id;
  delete from ${folding ? 'step_rows' : 'steps'} where run_id = old.id;
  delete from ${folding ? 'journal_rows' : 'journal_entries'} where run_id = old.id;
  return old;
end
$fn$`

/**
 * `agentvisor_commit` (2026-12-01T170000) or `agentvisor_commit_deferred` (2026-12-02T010000),
 * the same arguments and fence, writing a step's commit as one step row; or, `folding` false,
 * exactly as those migrations made them (this migration's `down`).
 */
const commitFunction = (name: string, fence: string, folding: boolean): string => {
  const declare = folding
    ? `declare
  -- The answer's settlement, carried by the step row of the same step.
  answered boolean := coalesce(step_step = settle_step and settle_outcome = 'ok' and settle_error_kind is null
    and settle_http_status is null and settle_error_message is null and settle_partial_text is null, false);
  -- The next step's receipt, carried by this step's row when it knows nothing else yet.
  carried boolean := coalesce(next_step = step_step + 1 and next_error_kind is null and next_http_status is null and next_error_message is null
    and next_latency_ms is null and next_ttft_ms is null and next_tokens_in is null and next_tokens_out is null and next_partial_text is null, false);
`
    : ''
  const stepInsert = folding
    ? `insert into step_rows (${STEP_COLUMNS},
                           answer_attempt, answer_settled_at, answer_latency_ms, answer_ttft_ms, answer_tokens_in, answer_tokens_out,
                           next_step, next_attempt, next_provider, next_reason, next_started_at,
                           entry_seq, entry_first_seq, entry_transitions_json, entry_snapshot_json)
    values (${name}.run_id, step_step, step_provider, step_prompt_summary, step_text, step_tool_calls_json, step_results_json, step_feedback,
            step_tokens_in, step_tokens_out, step_at,
            case when answered then settle_attempt end, case when answered then settle_settled_at end,
            case when answered then settle_latency_ms end, case when answered then settle_ttft_ms end,
            case when answered then settle_tokens_in end, case when answered then settle_tokens_out end,
            case when carried then next_step end, case when carried then next_attempt end, case when carried then next_provider end,
            case when carried then next_reason end, case when carried then next_started_at end,
            ${name}.seq, ${name}.first_seq, ${name}.transitions_json, ${name}.snapshot_json);`
    : `insert into steps (${STEP_COLUMNS})
    values (${name}.run_id, step_step, step_provider, step_prompt_summary, step_text, step_tool_calls_json, step_results_json, step_feedback,
            step_tokens_in, step_tokens_out, step_at);`
  const entryInsert = `insert into ${folding ? 'journal_rows' : 'journal_entries'} (${ENTRY_COLUMNS})
  values (${name}.run_id, ${name}.seq, ${name}.first_seq, ${name}.transitions_json, ${name}.snapshot_json);`
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
  -- The receipt this commit settles${folding ? ', unless its step row carries the settlement' : ''}: a column the settlement leaves null
  -- keeps its value.
  if settle_step is not null${folding ? ' and not answered' : ''} then
    update attempts a
       set outcome = settle_outcome, settled_at = settle_settled_at,
           error_kind = coalesce(settle_error_kind, a.error_kind), http_status = coalesce(settle_http_status, a.http_status),
           error_message = coalesce(settle_error_message, a.error_message), latency_ms = coalesce(settle_latency_ms, a.latency_ms),
           ttft_ms = coalesce(settle_ttft_ms, a.ttft_ms), tokens_in = coalesce(settle_tokens_in, a.tokens_in),
           tokens_out = coalesce(settle_tokens_out, a.tokens_out), partial_text = coalesce(settle_partial_text, a.partial_text)
     where a.run_id = ${name}.run_id and a.step = settle_step and a.attempt = settle_attempt and a.outcome = 'pending';
  end if;
  if step_step is not null then
    ${stepInsert}
  end if;
  if next_step is not null${folding ? ' and not carried' : ''} then
    insert into ${folding ? 'attempt_rows' : 'attempts'} (${ATTEMPT_COLUMNS})
    values (${name}.run_id, next_step, next_attempt, next_provider, next_reason, 'pending', next_error_kind, next_http_status, next_error_message,
            next_latency_ms, next_ttft_ms, next_tokens_in, next_tokens_out, next_partial_text, next_started_at, null);
  end if;
  -- Any other write, in order, as agentvisor_apply_writes (2026-12-01T130000) defines it.
  if writes is not null then
    perform agentvisor_apply_writes(writes);
  end if;
  -- The commit's journal entry: its transitions and the one snapshot (docs/durability.md, "The journal")${
    folding ? ', in its own row when\n  -- no step row carries it' : ''
  }.
  ${folding ? `if step_step is null then\n    ${entryInsert}\n  end if;` : entryInsert}
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

/** Every function this migration replaces, as it makes it or, `folding` false, as it found it. */
const functions = (folding: boolean): ReadonlyArray<string> => [
  settlePending(folding),
  deleteRows(folding),
  commitFunction('agentvisor_commit', COMMIT_FENCE, folding),
  commitFunction('agentvisor_commit_deferred', DEFERRED_FENCE, folding)
]

const isPostgres = (db: Kysely<any>): boolean => db.getExecutor().adapter instanceof PostgresAdapter

export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  const statements = [
    'drop view transitions',
    'alter table steps rename to step_rows',
    'alter table attempts rename to attempt_rows',
    'alter table journal_entries rename to journal_rows',
    ...STEP_ROW_COLUMNS.map(([column, type]) => `alter table step_rows add column ${column} ${type}`),
    STEPS_VIEW,
    ATTEMPTS_VIEW,
    // A receipt written through the view without an outcome is pending, as the table's default says.
    "alter view attempts alter column outcome set default 'pending'",
    JOURNAL_VIEW,
    TRANSITIONS_VIEW,
    ATTEMPTS_WRITE,
    'create trigger attempts_write instead of insert or update or delete on attempts for each row execute function agentvisor_attempts_write()',
    JOURNAL_WRITE,
    'create trigger journal_entries_write instead of insert or update or delete on journal_entries for each row execute function agentvisor_journal_write()',
    ...functions(true)
  ]
  for (const statement of statements) await sql.raw(statement).execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  // Every receipt and entry as the views read them, back into tables of their own; the functions
  // as they were.
  const statements = [
    'create table zz_attempts as select * from attempts',
    'create table zz_entries as select * from journal_entries',
    'drop view transitions',
    'drop view journal_entries',
    'drop view attempts',
    'drop view steps',
    'drop function agentvisor_attempts_write()',
    'drop function agentvisor_journal_write()',
    'delete from attempt_rows',
    `insert into attempt_rows select ${ATTEMPT_COLUMNS} from zz_attempts`,
    'delete from journal_rows',
    `insert into journal_rows select ${ENTRY_COLUMNS} from zz_entries`,
    'drop table zz_attempts',
    'drop table zz_entries',
    ...STEP_ROW_COLUMNS.map(([column]) => `alter table step_rows drop column ${column}`),
    'alter table step_rows rename to steps',
    'alter table attempt_rows rename to attempts',
    'alter table journal_rows rename to journal_entries',
    TRANSITIONS_VIEW,
    ...functions(false)
  ]
  for (const statement of statements) await sql.raw(statement).execute(db)
}
