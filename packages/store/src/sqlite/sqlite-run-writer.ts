import type BetterSqlite3 from 'better-sqlite3'
import type { Kysely } from 'kysely'
import type { Database } from '../database.js'
import { LeaseLostError } from '../errors.js'
import type { RunWrite, TransitionCommit } from '../run-writer/run-write.js'
import type { RunWriter } from '../run-writer/run-writer.js'
import type { ApprovalRow } from '../tables/approvals.table.js'
import type { ToolEffectRow } from '../tables/tool-effects.table.js'

type Params = ReadonlyArray<string | number | bigint | null>

/**
 * The SQLite `RunWriter`: every write of a transition is a cached prepared statement, all of
 * them in one synchronous `BEGIN IMMEDIATE` transaction, with the fence folded into the run's
 * own update (`WHERE lease_token = ?`). No query is built and no promise is made on this path:
 * at every step that is most of what a durable transition costs through Kysely.
 *
 * It shares its connection with the store's Kysely instance. Kysely keeps a transaction open
 * across awaits (an approval decision, a migration); a synchronous write issued meanwhile
 * would land inside that transaction. So when one is open, the write waits for Kysely's
 * connection lock (held until that transaction ends) and then runs.
 */
export function sqliteRunWriter(db: Kysely<Database>, sqlite: BetterSqlite3.Database): RunWriter {
  const statements = new Map<string, BetterSqlite3.Statement>()
  const statement = (sql: string): BetterSqlite3.Statement => {
    let prepared = statements.get(sql)
    if (prepared === undefined) {
      prepared = sqlite.prepare(sql)
      statements.set(sql, prepared)
    }
    return prepared
  }
  const run = (sql: string, params: Params): number => statement(sql).run(...params).changes

  /** `INSERT INTO table (the row's columns) VALUES (...)`, prepared once per table and column list. */
  const insert = (table: string, row: object, conflict = ''): void => {
    const columns = Object.keys(row)
    const sql = `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})${conflict}`
    run(sql, Object.values(row).map(bindable))
  }
  const update = (table: string, set: object, where: string, params: Params): number => {
    const columns = Object.keys(set)
    const sql = `UPDATE ${table} SET ${columns.map((c) => `${c} = ?`).join(', ')} WHERE ${where}`
    return run(sql, [...Object.values(set).map(bindable), ...params])
  }

  const apply = (write: RunWrite): void => {
    switch (write.op) {
      case 'insertAttempt':
        return insert('attempts', { ...write.row, outcome: 'pending', settled_at: null })
      case 'settleAttempt':
        update('attempts', write.patch, "run_id = ? AND step = ? AND attempt = ? AND outcome = 'pending'", [write.runId, write.step, write.attempt])
        return
      case 'insertStep':
        return insert('steps', write.row)
      case 'setStepResults':
        update('steps', { results_json: write.resultsJson }, 'run_id = ? AND step = ?', [write.runId, write.step])
        return
      case 'setStepFeedback':
        update('steps', { feedback: write.feedback }, 'run_id = ? AND step = ?', [write.runId, write.step])
        return
      case 'insertApproval':
        return insert('approvals', write.row, ' ON CONFLICT (run_id, step, tool_call_id) DO NOTHING')
      case 'insertPolicyEvents':
        for (const row of write.rows) insert('policy_events', row)
        return
      case 'insertRun': {
        const { contract_json, ...row } = write.row
        insert('runs', row)
        insert('run_contracts', { run_id: row.id, contract_json })
        return
      }
      case 'startToolEffect':
        return insert(
          'tool_effects',
          { ...write.row, status: 'started', result_json: null, completed_at: null },
          ' ON CONFLICT (run_id, step, position) DO UPDATE SET status = excluded.status, name = excluded.name, arguments = excluded.arguments, started_at = excluded.started_at, result_json = NULL, completed_at = NULL'
        )
      case 'completeToolEffect':
        update('tool_effects', { status: 'completed', result_json: write.resultJson, completed_at: write.at }, 'run_id = ? AND step = ? AND position = ?', [
          write.runId,
          write.step,
          write.position
        ])
        return
    }
  }

  const commitNow = sqlite
    .transaction((commit: TransitionCommit) => {
      // The fence and the head update are one statement: a superseded driver changes no row.
      const changed = update('runs', commit.head, 'id = ? AND lease_token = ?', [commit.runId, commit.leaseToken])
      if (changed === 0) throw new LeaseLostError({ runId: commit.runId })
      for (const write of commit.writes) apply(write)
      for (const transition of commit.transitions) insert('transitions', transition)
    })
    .immediate.bind(null)

  const writeNow = sqlite
    .transaction((runId: string, leaseToken: number, writes: ReadonlyArray<RunWrite>) => {
      const row = statement('SELECT lease_token FROM runs WHERE id = ?').get(runId) as { lease_token: number } | undefined
      if (row?.lease_token !== leaseToken) throw new LeaseLostError({ runId })
      for (const write of writes) apply(write)
    })
    .immediate.bind(null)

  /** Runs `f` now, or once the Kysely transaction holding the connection has ended. */
  const whenFree = <A>(f: () => A): A | Promise<A> => (sqlite.inTransaction ? db.connection().execute(async () => f()) : f())

  return {
    commit: (commit) => whenFree(() => commitNow(commit)),
    write: (runId, leaseToken, writes) => whenFree(() => writeNow(runId, leaseToken, writes)),
    approvals: (runId, step) =>
      statement('SELECT * FROM approvals WHERE run_id = ? AND step = ? ORDER BY step, position, created_at').all(runId, step) as ApprovalRow[],
    toolEffects: (runId, step) => statement('SELECT * FROM tool_effects WHERE run_id = ? AND step = ? ORDER BY step, position').all(runId, step) as ToolEffectRow[]
  }
}

/** better-sqlite3 binds no `undefined` or booleans: the rows' optional columns become NULL. */
const bindable = (value: unknown): string | number | bigint | null => {
  if (value === undefined || value === null) return null
  if (typeof value === 'boolean') return value ? 1 : 0
  return value as string | number | bigint
}
