// The storage layout A/B (docs/benchmarks.md, "Storage layout A/B"; not part of `npm run bench`):
// what the bench's `list_dir` step commits (scenario 1: the answering receipt settled, the step row
// with its results, the next step's receipt, one journal entry of 3 transitions and its snapshot,
// the run's row left for a later refresh), written by each layout, commit after commit, in one
// process. On PostgreSQL:
//
// - `packed`: the layout of the migrations up to 2026-12-02T200000 (the step row carrying the
//   settlement, the next receipt and the entry; `steps`, `attempts`, `journal_entries` views with
//   INSTEAD OF triggers), a commit one call of `agentvisor_commit_deferred` with its 48 arguments.
// - `plain`: plain tables (`steps`, `attempts`, `journal_entries` as the initial migrations made
//   them: foreign keys to `runs`, the status rules as CHECKs), a commit one statement of
//   data-modifying CTEs (the fence a locked read of the run's row, then one INSERT or UPDATE per
//   table), no function.
// - `plain-nofk`: the same tables without the foreign keys and with the rules as domains (what the
//   2026-12-01T170000 and 2026-12-02T160000 migrations did before the step rows), the same statement;
//   `plain-nofk-check` without the keys, with the rules as CHECKs; `plain-nofk-fn` the tables of
//   `plain-nofk` written by the same four statements inside a PL/pgSQL function (the packed
//   layout's way of calling, on plain tables); `plain-nofk-generic` the statement of `plain-nofk`
//   on a connection with `plan_cache_mode=force_generic_plan` (planned once, not at each call);
// - `plain-record`: the store's layout since 2026-12-05: the tables of `plain-nofk`, a commit one call
//   of the store's `agentvisor_commit` taking the rows as records, as its writer makes it
//   (postgres/postgres-statement.ts `stepCommitCall`, from dist).
//
// On SQLite (which this A/B only measures): `packed` is today's `run_log` (one table under the four
// views, written directly by prepared statements, as sqlite/sqlite-commits.ts does), `plain` the
// four tables as 2026-11-29T210000 left them (WITHOUT ROWID, CHECKs with IN lists), `plain-eq`
// the same with the CHECKs as `=` comparisons, `plain-eq-rowid` that as rowid tables; each commit the same four prepared statements in one BEGIN IMMEDIATE.
//
// Every round measures each layout once on a fresh database, in alternating order, so that host
// drift moves every side of a round: a figure is the median over rounds of µs a commit, a ratio
// the median of each round's ratio to `packed`. PostgreSQL is measured with `synchronous_commit`
// at its default (`on`: a commit waits for its WAL flush) and `off` (weaker: a server crash may
// lose the last commits), on one server the script starts (postgres-server.mjs).
//   node --expose-gc layout-ab.mjs [postgres|sqlite|both]   (AB_ROUNDS=7, AB_COMMITS=2000, AB_WARM=500;
//   AB_LAYOUTS=a,b to measure only those beside `packed`; AB_SYNC=on,off)
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { Kysely, Migrator, PostgresDialect } from 'kysely'
import pg from 'pg'
import { median, nowMs, rm, round, tmp } from './lib.mjs'
import { startPostgres } from './postgres-server.mjs'

const store = await import(new URL('../packages/store/dist/index.js', import.meta.url).href)
// The store's own commit of the plain layout: its function (migration 2026-12-05T000000) and the writer's call of it.
const { COMMIT_FUNCTION } = await import(new URL('../packages/store/dist/migrations/2026-12-05T000000-postgres-plain-tables.js', import.meta.url).href)
const { stepCommitCall } = await import(new URL('../packages/store/dist/postgres/postgres-statement.js', import.meta.url).href)
const ROUNDS = Number(process.env.AB_ROUNDS ?? 7)
const COMMITS = Number(process.env.AB_COMMITS ?? 2000)
const WARM = Number(process.env.AB_WARM ?? 500)
const which = process.argv[2] ?? 'both'
/** The last migration of the packed layout: the old chain is kept to upgrade stores, frozen. */
const LAST_PACKED = '2026-12-02T200000-postgres-step-rows'

const RUN_ID = '01a24352-f1cc-7585-a376-aeaeeea786b8'
const AT = '2026-12-04T23:10:39.084Z'
// What the bench's step writes, as read back from a store after a run of scenario 1.
const STEP = {
  provider: 'script',
  prompt_summary: '20 messages; last (tool): . is empty',
  text: '',
  tool_calls_json: '[{"id":"call_10_1","name":"list_dir","arguments":"{\\"path\\":\\".\\"}"}]',
  results_json: '[{"toolCallId":"call_10_1","name":"list_dir","ok":true,"output":". is empty"}]'
}
const entryOf = (step) => {
  const s = 3 * step
  const transitions = [
    { seq: s - 2, from: 'dispatching', event: { type: 'PROVIDER_OK', hasToolCalls: true }, to: 'acting', at: AT },
    { seq: s - 1, from: 'acting', event: { type: 'TOOLS_DONE' }, to: 'verifying', at: AT },
    { seq: s, from: 'verifying', event: { type: 'VERIFY_FAILED' }, to: 'dispatching', at: AT }
  ]
  const snapshot = {
    v: 2,
    snapshot: {
      status: 'active',
      value: 'dispatching',
      context: {
        step: step + 1,
        completedSteps: step,
        providerIndex: 0,
        attempt: 0,
        reason: 'initial',
        retries: 0,
        dispatches: step,
        retryAt: null,
        lastHadToolCalls: true,
        error: null,
        ended: false,
        spawnedChildren: false
      }
    }
  }
  return { seq: s, firstSeq: s - 2, transitionsJson: JSON.stringify(transitions), snapshotJson: JSON.stringify(snapshot) }
}
/** The run's head refresh: every this many commits (about every 50 ms at each dialect's step). */
const REFRESH = { postgres: 64, sqlite: 256 }

const ignore = () => undefined

/** CPU ms of every `postgres` process (the script's server is the only one it starts). */
const serverCpuMs = () => {
  let ticks = 0
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      if (!stat.includes('(postgres)')) continue
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {}
  }
  return ticks * 10
}

// ---- PostgreSQL ----------------------------------------------------------------------------

const PLAIN_TABLES = (fk, rules) => {
  const ref = fk ? ' references runs (id) on delete cascade' : ''
  const reason = rules === 'check' ? 'text collate "C"' : 'agentvisor_attempt_reason'
  const outcome = rules === 'check' ? 'text collate "C"' : 'agentvisor_attempt_outcome'
  const checks =
    rules === 'check'
      ? `, constraint attempts_reason_check check (reason in ('initial', 'retry', 'fallover')),
         constraint attempts_outcome_check check (outcome in ('pending', 'ok', 'failed', 'unknown', 'cancelled'))`
      : ''
  return [
    'drop view transitions',
    'drop view journal_entries',
    'drop view attempts',
    'drop view steps',
    'drop table step_rows',
    'drop table attempt_rows',
    'drop table journal_rows',
    ...(rules === 'check'
      ? [
          'alter table runs alter column status type text collate "C"',
          `alter table runs add constraint runs_status_check check (status in ('running', 'awaiting_approval', 'awaiting_input', 'succeeded', 'step_cap', 'failed', 'cancelled', 'timed_out'))`
        ]
      : []),
    `create table steps (run_id text collate "C" not null${ref}, step integer not null, provider text collate "C" not null,
       prompt_summary text collate "C" not null default '', text text collate "C" not null default '', tool_calls_json text collate "C" not null default '[]',
       results_json text collate "C", feedback text collate "C", tokens_in integer not null default 0, tokens_out integer not null default 0,
       at text collate "C" not null, constraint steps_pk primary key (run_id, step))`,
    `create table attempts (run_id text collate "C" not null${ref}, step integer not null, attempt integer not null, provider text collate "C" not null,
       reason ${reason} not null, outcome ${outcome} not null default 'pending', error_kind text collate "C", http_status integer,
       error_message text collate "C", latency_ms bigint, ttft_ms bigint, tokens_in integer, tokens_out integer, partial_text text collate "C",
       started_at text collate "C" not null, settled_at text collate "C", constraint attempts_pk primary key (run_id, step, attempt)${checks})`,
    `create table journal_entries (run_id text collate "C" not null${ref}, seq integer not null, first_seq integer not null,
       transitions_json text collate "C" not null, snapshot_json text collate "C" not null, constraint journal_entries_pk primary key (run_id, seq))`
  ]
}

/** `plain-nofk-fn`: the same four statements in a PL/pgSQL function (what the packed layout's function does, on plain tables). */
const PLAIN_FUNCTION = `
create function ab_commit(run_id text, lease_token bigint, outcome text, settled_at text, latency_ms bigint, ttft_ms bigint, tokens_in integer, tokens_out integer,
  step integer, attempt integer, provider text, prompt_summary text, text_ text, tool_calls_json text, results_json text, feedback text, step_tokens_in integer,
  step_tokens_out integer, at text, next_step integer, next_attempt integer, next_provider text, next_reason text, next_started_at text,
  seq integer, first_seq integer, transitions_json text, snapshot_json text) returns integer language plpgsql as $fn$
begin
  perform 1 from runs r where r.id = ab_commit.run_id and r.lease_token = ab_commit.lease_token for no key update;
  if not found then return 0; end if;
  update attempts a set outcome = ab_commit.outcome, settled_at = ab_commit.settled_at, latency_ms = coalesce(ab_commit.latency_ms, a.latency_ms),
         ttft_ms = coalesce(ab_commit.ttft_ms, a.ttft_ms), tokens_in = coalesce(ab_commit.tokens_in, a.tokens_in), tokens_out = coalesce(ab_commit.tokens_out, a.tokens_out)
   where a.run_id = ab_commit.run_id and a.step = ab_commit.step and a.attempt = ab_commit.attempt and a.outcome = 'pending';
  insert into steps (run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at)
  values (ab_commit.run_id, ab_commit.step, provider, prompt_summary, text_, tool_calls_json, results_json, feedback, step_tokens_in, step_tokens_out, at);
  insert into attempts (run_id, step, attempt, provider, reason, started_at) values (ab_commit.run_id, next_step, next_attempt, next_provider, next_reason, next_started_at);
  insert into journal_entries (run_id, seq, first_seq, transitions_json, snapshot_json)
  values (ab_commit.run_id, ab_commit.seq, ab_commit.first_seq, ab_commit.transitions_json, ab_commit.snapshot_json);
  return 1;
end
$fn$`
const PLAIN_FUNCTION_CALL = `select ab_commit(${Array.from({ length: 28 }, (_, i) => `$${i + 1}`).join(', ')}) as fenced`

const PG_LAYOUTS = {
  packed: { setup: [] },
  plain: { setup: PLAIN_TABLES(true, 'check') },
  'plain-nofk': { setup: PLAIN_TABLES(false, 'domain') },
  'plain-nofk-check': { setup: PLAIN_TABLES(false, 'check') },
  'plain-nofk-fn': { setup: [...PLAIN_TABLES(false, 'domain'), PLAIN_FUNCTION] },
  'plain-nofk-generic': { setup: PLAIN_TABLES(false, 'domain'), options: '-c plan_cache_mode=force_generic_plan' },
  'plain-record': { setup: [...PLAIN_TABLES(false, 'domain'), ...COMMIT_FUNCTION] }
}

/** The deferred commit of the plain layouts: one statement, the fence first, one write per table. */
const PLAIN_COMMIT = `
with fence as (select id from runs where id = $1 and lease_token = $2 for no key update),
settled as (
  update attempts a set outcome = $3, settled_at = $4, latency_ms = coalesce($5, a.latency_ms), ttft_ms = coalesce($6, a.ttft_ms),
         tokens_in = coalesce($7, a.tokens_in), tokens_out = coalesce($8, a.tokens_out)
    from fence where a.run_id = fence.id and a.step = $9 and a.attempt = $10 and a.outcome = 'pending'),
step as (
  insert into steps (run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at)
  select id, $9, $11, $12, $13, $14, $15, $16, $17, $18, $19 from fence),
next as (
  insert into attempts (run_id, step, attempt, provider, reason, started_at) select id, $20, $21, $22, $23, $24 from fence),
entry as (
  insert into journal_entries (run_id, seq, first_seq, transitions_json, snapshot_json) select id, $25, $26, $27, $28 from fence)
select count(*)::int as fenced from fence`

const plainValues = (step) => {
  const e = entryOf(step)
  return [
    RUN_ID,
    1,
    'ok',
    AT,
    0,
    null,
    0,
    0,
    step,
    0,
    STEP.provider,
    STEP.prompt_summary,
    STEP.text,
    STEP.tool_calls_json,
    STEP.results_json,
    null,
    0,
    0,
    AT,
    step + 1,
    0,
    STEP.provider,
    'initial',
    AT,
    e.seq,
    e.firstSeq,
    e.transitionsJson,
    e.snapshotJson
  ]
}

/** The step's writes as the driver gives them to the store's writer (`plain-record`). */
const recordWrites = (step) => [
  { op: 'settleAttempt', runId: RUN_ID, step, attempt: 0, patch: { outcome: 'ok', settled_at: AT, latency_ms: 0, tokens_in: 0, tokens_out: 0 } },
  { op: 'insertStep', row: { run_id: RUN_ID, step, ...STEP, feedback: null, tokens_in: 0, tokens_out: 0, at: AT } },
  { op: 'insertAttempt', row: { run_id: RUN_ID, step: step + 1, attempt: 0, provider: STEP.provider, reason: 'initial', started_at: AT } }
]
const journalOf = (step) => {
  const e = entryOf(step)
  return { run_id: RUN_ID, seq: e.seq, first_seq: e.firstSeq, transitions_json: e.transitionsJson, snapshot_json: e.snapshotJson }
}

const PACKED_COMMIT = `SELECT agentvisor_commit_deferred(${Array.from({ length: 48 }, (_, i) => `$${i + 1}`).join(', ')})`
/** The 48 arguments, in the order of migration 2026-12-01T170000 (postgres-commit-arguments.ts did this until 2026-12-05). */
const packedValues = (step) => {
  const e = entryOf(step)
  const head = [null, 'dispatching', step, AT, null, null]
  const settle = [step, 0, 'ok', AT, null, null, null, 0, null, 0, 0, null]
  const row = [step, STEP.provider, STEP.prompt_summary, STEP.text, STEP.tool_calls_json, STEP.results_json, null, 0, 0, AT]
  const next = [step + 1, 0, STEP.provider, 'initial', null, null, null, null, null, null, null, null, AT]
  return [RUN_ID, 1, ...head, ...settle, ...row, ...next, null, e.seq, e.firstSeq, e.transitionsJson, e.snapshotJson]
}

const migratePacked = async (url) => {
  const migrating = new pg.Pool({ connectionString: url, max: 1 })
  migrating.on('error', ignore)
  const db = new Kysely({ dialect: new PostgresDialect({ pool: migrating }) })
  const chain = Object.fromEntries(Object.entries(store.migrations).filter(([name]) => name <= LAST_PACKED))
  const outcome = await new Migrator({ db, provider: { getMigrations: async () => chain } }).migrateToLatest()
  await db.destroy()
  if (outcome.error !== undefined) throw outcome.error
}

/** µs a commit and the server's CPU µs a commit of `layout` on a fresh database of `server`. */
const pgRound = async (server, layout, synchronousCommit) => {
  const name = await server.createDatabase()
  try {
    await migratePacked(server.url(name))
    const options = [`-c synchronous_commit=${synchronousCommit}`, PG_LAYOUTS[layout].options ?? ''].join(' ')
    const pool = new pg.Pool({ connectionString: server.url(name), max: 1, options })
    // The database is dropped with its connections (`with (force)`) while the pool may still be closing one.
    pool.on('error', ignore)
    try {
      for (const statement of PG_LAYOUTS[layout].setup) await pool.query(statement)
      await pool.query(
        `insert into runs (id, status, goal, state, steps, created_at, updated_at, lease_owner, lease_expires_at, lease_token)
         values ($1, 'running', 'bench', 'dispatching', 0, $2, $2, 'bench', $3, 1)`,
        [RUN_ID, AT, Date.now() + 3_600_000]
      )
      await pool.query('insert into run_contracts (run_id, contract_json) values ($1, $2)', [RUN_ID, '{}'])
      await pool.query(`insert into attempts (run_id, step, attempt, provider, reason, started_at) values ($1, 1, 0, 'script', 'initial', $2)`, [RUN_ID, AT])
      const commit = async (step) => {
        if (layout === 'packed') await pool.query({ name: 'packed', text: PACKED_COMMIT, values: packedValues(step) })
        else if (layout === 'plain-record') {
          const call = stepCommitCall(RUN_ID, 1, undefined, recordWrites(step), journalOf(step))
          const { rows } = await pool.query({ name: 'record', text: call.text, values: call.values })
          if (rows[0].fenced !== true) throw new Error('lease lost')
        } else {
          const fn = layout.endsWith('-fn')
          const { rows } = await pool.query({ name: fn ? 'plain-fn' : 'plain', text: fn ? PLAIN_FUNCTION_CALL : PLAIN_COMMIT, values: plainValues(step) })
          if (rows[0].fenced !== 1) throw new Error('lease lost')
        }
        if (step % REFRESH.postgres === 0) {
          await pool.query({
            name: 'refresh',
            text: 'update runs set state = $1, steps = $2, updated_at = $3 where id = $4 and lease_token = $5',
            values: ['dispatching', step, AT, RUN_ID, 1]
          })
        }
      }
      let step = 1
      for (; step <= WARM; step++) await commit(step)
      globalThis.gc?.()
      const cpu0 = serverCpuMs()
      const t0 = nowMs()
      for (const end = step + COMMITS; step < end; step++) await commit(step)
      const us = ((nowMs() - t0) * 1000) / COMMITS
      const serverUs = ((serverCpuMs() - cpu0) * 1000) / COMMITS
      // Every row is there, as the packed layout's views read it.
      const { rows } = await pool.query(
        'select (select count(*) from steps where run_id = $1)::int as steps, (select count(*) from journal_entries where run_id = $1)::int as entries',
        [RUN_ID]
      )
      if (rows[0].steps !== WARM + COMMITS || rows[0].entries !== WARM + COMMITS) throw new Error(`${layout}: ${JSON.stringify(rows[0])}`)
      return { us, serverUs }
    } finally {
      await pool.end()
    }
  } finally {
    await server.dropDatabase(name)
  }
}

// ---- SQLite --------------------------------------------------------------------------------

/** `column IN (...)`, or with `eq` the same rule as `=` comparisons (SQLite builds a temporary index for an IN list of three or more at every statement: 2026-12-01T160000). */
const oneOf = (column, values, eq) =>
  eq ? `(${values.map((v) => `"${column}" = '${v}'`).join(' or ')})` : `${column} in (${values.map((v) => `'${v}'`).join(', ')})`

/**
 * The four tables of a plain SQLite layout. `shape`: `clustered` (WITHOUT ROWID, as
 * 2026-11-29T210000 left them), `rowid` (rowid tables, the key a unique index beside each), or
 * `mixed` (`attempts`, a narrow row, clustered; `steps` and `journal_entries`, wide rows that
 * arrive in commit order, rowid tables that grow at their end with the key an index beside).
 * `journal` (only `journal_entries`, the widest row, a rowid table). `rules`: `in` (CHECKs with IN
 * lists), `eq` (CHECKs as `=` comparisons), `none` (no CHECK: the writer's values are the rules),
 * `ref` (foreign keys to a table of the values, one row each: a new value is an INSERT). `fk`:
 * the foreign keys to `runs`.
 */
const SQLITE_PLAIN = ({ shape, rules, fk }) => {
  const rowid = { clustered: [], rowid: ['steps', 'attempts', 'journal_entries'], mixed: ['steps', 'journal_entries'], journal: ['journal_entries'] }[shape]
  const options = (table) => (rowid.includes(table) ? '' : ' without rowid')
  const ref = fk ? ' references "runs" ("id") on delete cascade' : ''
  const check = (name, column, values) => (rules === 'none' || rules === 'ref' ? '' : `, constraint "${name}" check (${oneOf(column, values, rules === 'eq')})`)
  const keyToValues = (table) => (rules === 'ref' ? ` references "${table}" ("value")` : '')
  const references =
    rules === 'ref'
      ? [
          'create table "attempt_reasons" ("value" text primary key) without rowid',
          `insert into "attempt_reasons" values ('initial'), ('retry'), ('fallover')`,
          'create table "attempt_outcomes" ("value" text primary key) without rowid',
          `insert into "attempt_outcomes" values ('pending'), ('ok'), ('failed'), ('unknown'), ('cancelled')`
        ]
      : []
  return [
    ...references,
    'drop view transitions',
    'drop view attempts',
    'drop view steps',
    'drop view journal_entries',
    'drop view tool_effects',
    'drop table run_log',
    `create table "steps" ("run_id" text not null${ref}, "step" integer not null, "provider" text not null, "prompt_summary" text default '' not null, "text" text default '' not null, "tool_calls_json" text default '[]' not null, "results_json" text, "feedback" text, "tokens_in" integer default 0 not null, "tokens_out" integer default 0 not null, "at" text not null, constraint "steps_pk" primary key ("run_id", "step"))${options('steps')}`,
    `create table "attempts" ("run_id" text not null${ref}, "step" integer not null, "attempt" integer not null, "provider" text not null, "reason" text not null${keyToValues('attempt_reasons')}, "outcome" text default 'pending' not null${keyToValues('attempt_outcomes')}, "error_kind" text, "http_status" integer, "error_message" text, "latency_ms" integer, "ttft_ms" integer, "tokens_in" integer, "tokens_out" integer, "partial_text" text, "started_at" text not null, "settled_at" text, constraint "attempts_pk" primary key ("run_id", "step", "attempt")${check('attempts_reason_check', 'reason', ['initial', 'retry', 'fallover'])}${check('attempts_outcome_check', 'outcome', ['pending', 'ok', 'failed', 'unknown', 'cancelled'])})${options('attempts')}`,
    `create table "journal_entries" ("run_id" text not null${ref}, "seq" integer not null, "first_seq" integer not null, "transitions_json" text not null, "snapshot_json" text not null, constraint "journal_entries_pk" primary key ("run_id", "seq"))${options('journal_entries')}`
  ]
}

/** The plain SQLite layouts measured beside `packed`: name, table shape, rules, foreign keys. */
const SQLITE_PLAIN_LAYOUTS = [
  ['plain', 'clustered', 'in', true],
  ['plain-eq', 'clustered', 'eq', true],
  ['plain-eq-rowid', 'rowid', 'eq', true],
  ['plain-nocheck', 'clustered', 'none', true],
  ['plain-nocheck-nofk', 'clustered', 'none', false],
  ['plain-mixed', 'mixed', 'eq', true],
  ['plain-mixed-nocheck', 'mixed', 'none', true],
  ['plain-rowid-nocheck-nofk', 'rowid', 'none', false],
  ['plain-journal-nocheck', 'journal', 'none', true],
  ['plain-ref', 'clustered', 'ref', true]
]

const SQLITE_LAYOUTS = {
  packed: {
    setup: [],
    entry:
      "INSERT INTO run_log (run_id, step, kind, n, first_seq, transitions_json, snapshot_json) SELECT ?, ?, 'j', ?, ?, ?, ? WHERE (SELECT lease_token FROM runs WHERE id = ?) = ?",
    settle:
      "UPDATE run_log SET outcome = ?, settled_at = ?, latency_ms = coalesce(?, latency_ms), ttft_ms = coalesce(?, ttft_ms), tokens_in = coalesce(?, tokens_in), tokens_out = coalesce(?, tokens_out) WHERE run_id = ? AND step = ? AND kind = 'a' AND n = ? AND outcome = 'pending'",
    step: "INSERT INTO run_log (kind, n, run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at) VALUES ('s', 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    next: "INSERT INTO run_log (kind, run_id, step, n, provider, reason, outcome, started_at) VALUES ('a', ?, ?, ?, ?, ?, 'pending', ?)"
  },
  ...Object.fromEntries(
    SQLITE_PLAIN_LAYOUTS.map(([name, shape, rules, fk]) => [
      name,
      {
        setup: SQLITE_PLAIN({ shape, rules, fk }),
        // The entry has no step column: the step argument is bound and ignored (`? IS NOT NULL`), so every layout binds the same values.
        entry:
          'INSERT INTO journal_entries (run_id, seq, first_seq, transitions_json, snapshot_json) SELECT ?, ?, ?, ?, ? WHERE ? IS NOT NULL AND (SELECT lease_token FROM runs WHERE id = ?) = ?',
        settle:
          "UPDATE attempts SET outcome = ?, settled_at = ?, latency_ms = coalesce(?, latency_ms), ttft_ms = coalesce(?, ttft_ms), tokens_in = coalesce(?, tokens_in), tokens_out = coalesce(?, tokens_out) WHERE run_id = ? AND step = ? AND attempt = ? AND outcome = 'pending'",
        step: 'INSERT INTO steps (run_id, step, provider, prompt_summary, text, tool_calls_json, results_json, feedback, tokens_in, tokens_out, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        next: "INSERT INTO attempts (run_id, step, attempt, provider, reason, outcome, started_at) VALUES (?, ?, ?, ?, ?, 'pending', ?)"
      }
    ])
  )
}

/** µs a commit of `layout` on a fresh SQLite file made by the store's migrations (WAL, synchronous=NORMAL). */
const sqliteRound = async (layout) => {
  const dir = tmp('layoutab')
  const file = join(dir, 'av.db')
  try {
    const opened = await store.openStore(file)
    await opened.close()
    const db = new Database(file)
    db.pragma('synchronous = NORMAL')
    db.pragma('foreign_keys = ON')
    const spec = SQLITE_LAYOUTS[layout]
    db.transaction(() => {
      for (const statement of spec.setup) db.exec(statement)
    })()
    db.prepare(
      `insert into runs (id, status, goal, state, steps, created_at, updated_at, lease_owner, lease_expires_at, lease_token) values (?, 'running', 'bench', 'dispatching', 0, ?, ?, 'bench', ?, 1)`
    ).run(RUN_ID, AT, AT, Date.now() + 3_600_000)
    const entry = db.prepare(spec.entry)
    const settle = db.prepare(spec.settle)
    const insertStep = db.prepare(spec.step)
    const next = db.prepare(spec.next)
    const refresh = db.prepare('UPDATE runs SET state = ?, steps = ?, updated_at = ? WHERE id = ? AND lease_token = ?')
    next.run(RUN_ID, 1, 0, STEP.provider, 'initial', AT)
    const commit = db
      .transaction((step) => {
        const e = entryOf(step)
        if (layout === 'packed') {
          if (entry.run(RUN_ID, step + 1, e.seq, e.firstSeq, e.transitionsJson, e.snapshotJson, RUN_ID, 1).changes === 0) throw new Error('lease lost')
        } else if (entry.run(RUN_ID, e.seq, e.firstSeq, e.transitionsJson, e.snapshotJson, step + 1, RUN_ID, 1).changes === 0) throw new Error('lease lost')
        settle.run('ok', AT, 0, null, 0, 0, RUN_ID, step, 0)
        insertStep.run(RUN_ID, step, STEP.provider, STEP.prompt_summary, STEP.text, STEP.tool_calls_json, STEP.results_json, null, 0, 0, AT)
        next.run(RUN_ID, step + 1, 0, STEP.provider, 'initial', AT)
        if (step % REFRESH.sqlite === 0) refresh.run('dispatching', step, AT, RUN_ID, 1)
      })
      .immediate.bind(null)
    let step = 1
    for (; step <= WARM; step++) commit(step)
    globalThis.gc?.()
    const cpu0 = process.cpuUsage()
    const t0 = nowMs()
    for (const end = step + COMMITS; step < end; step++) commit(step)
    const us = ((nowMs() - t0) * 1000) / COMMITS
    const cpu = process.cpuUsage(cpu0)
    // The process's CPU a commit (user and system): what a loaded host's scheduler does not add.
    const cpuUs = (cpu.user + cpu.system) / COMMITS
    const rows = db
      .prepare('select (select count(*) from steps where run_id = ?) as steps, (select count(*) from journal_entries where run_id = ?) as entries')
      .get(RUN_ID, RUN_ID)
    if (rows.steps !== WARM + COMMITS || rows.entries !== WARM + COMMITS) throw new Error(`${layout}: ${JSON.stringify(rows)}`)
    db.close()
    return { us, cpuUs }
  } finally {
    rm(dir)
  }
}

// ---- the rounds ----------------------------------------------------------------------------

/** The layouts measured: all, or `packed` and those AB_LAYOUTS names (comma-separated). */
const layoutsOf = (layouts) =>
  process.env.AB_LAYOUTS === undefined ? Object.keys(layouts) : ['packed', ...process.env.AB_LAYOUTS.split(',').filter((l) => l !== 'packed' && l in layouts)]

/** Every layout once a round, the order rotated; medians of the figures and of the ratios to `packed`. */
const rounds = async (label, layouts, measure) => {
  const figures = Object.fromEntries(layouts.map((l) => [l, { us: [], serverUs: [], cpuUs: [], ratio: [], cpuRatio: [] }]))
  for (const l of layouts) await measure(l) // warm-up: the JIT, the server's caches
  for (let r = 0; r < ROUNDS; r++) {
    const order = layouts.map((_, i) => layouts[(i + r) % layouts.length])
    const got = {}
    for (const l of order) got[l] = await measure(l)
    for (const l of layouts) {
      figures[l].us.push(got[l].us)
      if (got[l].serverUs !== undefined) figures[l].serverUs.push(got[l].serverUs)
      if (got[l].cpuUs !== undefined) {
        figures[l].cpuUs.push(got[l].cpuUs)
        figures[l].cpuRatio.push(got[l].cpuUs / got.packed.cpuUs)
      }
      figures[l].ratio.push(got[l].us / got.packed.us)
    }
  }
  console.log(`\n${label}: ${ROUNDS} rounds of ${COMMITS} commits (after ${WARM} untimed) per layout`)
  for (const l of layouts) {
    const f = figures[l]
    const server = f.serverUs.length > 0 ? `, server CPU µs a commit ${round(median(f.serverUs))}` : ''
    const cpu =
      f.cpuUs.length > 0
        ? `; CPU µs a commit ${round(median(f.cpuUs))} (${round(Math.min(...f.cpuUs))}–${round(Math.max(...f.cpuUs))}), /packed ${median(f.cpuRatio).toFixed(3)}`
        : ''
    console.log(
      `  ${l.padEnd(12)} µs a commit ${round(median(f.us))} (${round(Math.min(...f.us))}–${round(Math.max(...f.us))})${server}; /packed ${median(f.ratio).toFixed(3)} (${f.ratio.map((x) => x.toFixed(2)).join(', ')})${cpu}`
    )
  }
}

if (which === 'postgres' || which === 'both') {
  const server = await startPostgres({ synchronousCommit: 'on' })
  try {
    for (const sync of (process.env.AB_SYNC ?? 'on,off').split(',')) {
      await rounds(
        `PostgreSQL, synchronous_commit=${sync}${sync === 'off' ? ' (weaker: a server crash may lose the last commits)' : ' (the default)'}`,
        layoutsOf(PG_LAYOUTS),
        (l) => pgRound(server, l, sync)
      )
    }
  } finally {
    await server.stop()
  }
}
if (which === 'sqlite' || which === 'both') {
  await rounds("SQLite, WAL, synchronous=NORMAL (the store's)", layoutsOf(SQLITE_LAYOUTS), sqliteRound)
}
process.exit(0)
