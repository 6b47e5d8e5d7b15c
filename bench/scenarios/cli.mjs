// Scenario 6: CLI cold start, `agentvisor runs --json` on a database of N runs.
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { actorsUrl, cliBin, nowMs, rm, scriptedTask, tmp, workspace } from '../lib.mjs'

const Database = createRequire(new URL('../../packages/store/package.json', import.meta.url))('better-sqlite3')

/** A store of `runs` finished runs: one real run, its row copied with new ids. */
export const makeRunsDb = async (runs) => {
  const { Agentvisor } = await import(actorsUrl)
  const dir = tmp('cli')
  const ws = workspace(dir)
  const db = join(dir, 'av.db')
  const av = await Agentvisor.open({ db, telemetry: false })
  await av.run(scriptedTask(ws, 1))
  await av.close()
  const sqlite = new Database(db)
  sqlite.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${runs - 1})
    INSERT INTO runs (id, parent_id, status, goal, state, steps, error_json, created_at, updated_at, ended_at)
    SELECT printf('bench-%05d', n.i), NULL, r.status, r.goal, r.state, r.steps, r.error_json, r.created_at, r.updated_at, r.ended_at
    FROM n, (SELECT * FROM runs LIMIT 1) AS r`)
  sqlite.exec(`INSERT INTO run_contracts (run_id, contract_json)
    SELECT r.id, c.contract_json FROM runs r, (SELECT contract_json FROM run_contracts LIMIT 1) AS c WHERE r.id LIKE 'bench-%'`)
  const count = sqlite.prepare('SELECT count(*) AS n FROM runs').get().n
  sqlite.close()
  return { dir, db, count }
}

/** Wall time of one `agentvisor runs --json` process, from spawn to exit. */
export const cliColdStartMs = (db, expected) => {
  const t0 = nowMs()
  const r = spawnSync(process.execPath, [cliBin, 'runs', '--json', '--db', db], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 })
  const ms = nowMs() - t0
  if (r.status !== 0) throw new Error(`agentvisor runs exited ${r.status}: ${r.stderr}`)
  const n = JSON.parse(r.stdout).length
  if (n !== expected) throw new Error(`agentvisor runs listed ${n} runs, expected ${expected}`)
  return ms
}

/** `node --version` alone: the floor any Node CLI pays. */
export const nodeStartMs = () => {
  const t0 = nowMs()
  spawnSync(process.execPath, ['-e', '0'])
  return nowMs() - t0
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { dir, db, count } = await makeRunsDb(Number(process.argv[2] ?? 10000))
  const times = [0, 1, 2].map(() => cliColdStartMs(db, count))
  console.log(count, times, nodeStartMs())
  rm(dir)
}
