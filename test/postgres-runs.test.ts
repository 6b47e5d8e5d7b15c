import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import * as path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { spawnTethered, type MockLlm } from '@agentvisor/cli'
import { migrationProvider } from '@agentvisor/store'
import { Kysely, Migrator, PostgresDialect } from 'kysely'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import { type CliResult, lastJson, mockTask, runCli, tempDir, waitFor, writeTask } from './support/cli.js'
import { freshDatabase, gaplessTransitions } from './support/pg.js'
import { accepts } from './support/free-port.js'
import { descendants, isGone, killAll } from './support/processes.js'
import { mockLlmPerTest } from './support/mock-llm.js'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined

const writeDone = { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE\n' } }] }

/** A task against the mock; the run's folder is also the CLI's cwd, so a stray SQLite store would show up in it. */
const setup = async (steps: unknown[], task: Record<string, unknown> = {}) => {
  mock = await startMock(steps)
  const dir = tempDir('agentvisor-pg-run-')
  const file = writeTask(dir, mockTask(mock.url, task, 'primary'))
  return { dir, file, ws: path.join(dir, 'ws') }
}

/** The CLI with `--db URL`, run in `dir` with no AGENTVISOR_DB of the test's own environment. */
const cli = (dir: string, args: string[], db: string, options: Parameters<typeof runCli>[1] = {}): Promise<CliResult> =>
  runCli([...args, '--db', db], { cwd: dir, ...options, env: { AGENTVISOR_DB: '', ...options.env } })

/**
 * A `run --json` SIGKILLed mid-dispatch on a fresh database: killed only once the receipt of the
 * dispatch is durable and the call is at the provider (which holds it for a minute).
 */
const killedMidDispatch = async (options: { readonly byChain?: boolean } = {}) => {
  const { dir, file, ws } = await setup([{ delayMs: 60_000, text: 'lost' }, writeDone])
  const db = await freshDatabase(options)
  let pid = 0
  let announced: string | undefined
  const first = cli(dir, ['run', file, '--json'], db.url, {
    onSpawn: (p) => (pid = p),
    onStderr: (text) => (announced ??= /run (\S+) started/.exec(text)?.[1])
  })
  const runId = await waitFor(() => announced, 'the run id')
  await waitFor(async () => {
    const rows = await db.query('select outcome from attempts where run_id = $1 and step = 1 and attempt = 0', [runId])
    return rows[0]?.['outcome'] === 'pending' && mock!.requests.length === 1 ? true : undefined
  }, 'the pending attempt of the slow dispatch')
  process.kill(pid, 'SIGKILL')
  expect((await first).code).toBe(null)
  return { dir, ws, db, runId, pid }
}

interface Trace {
  run: { id: string; status: string; parentId: string | null }
  transitions: Array<{ seq: number; from: string; event: string; to: string }>
  receipts: Array<{ step: number; attempts: Array<{ provider: string; reason: string; outcome: string }>; winner: number | null }>
}

describe('the CLI on PostgreSQL', () => {
  it('runs a task to success and keeps every transition, receipt and step in the database, readable by runs and show', async () => {
    const { dir, file, ws } = await setup([writeDone])
    const db = await freshDatabase()

    const run = await cli(dir, ['run', file, '--json'], db.url)
    expect(run.code, run.stderr).toBe(0)
    const result = lastJson<{ runId: string; status: string; steps: number; usage: { inputTokens: number; outputTokens: number } }>(run)
    expect(result).toEqual({
      runId: expect.any(String),
      status: 'succeeded',
      steps: 1,
      usage: { inputTokens: expect.any(Number), outputTokens: expect.any(Number) }
    })
    // The usage is what the mock reported for its one answer, and the row records it.
    const reported = await db.query<{ tokens_in: number; tokens_out: number }>('select tokens_in, tokens_out from attempts where run_id = $1', [result.runId])
    expect(result.usage).toEqual({ inputTokens: reported[0]!.tokens_in, outputTokens: reported[0]!.tokens_out })
    expect(result.usage.inputTokens).toBeGreaterThan(0)
    expect(readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('DONE\n')
    // The store is the database: no SQLite file appeared under the working folder.
    expect(existsSync(path.join(dir, '.agentvisor'))).toBe(false)

    const runs = await db.query('select id, status, state, steps, lease_owner from runs')
    expect(runs).toEqual([{ id: result.runId, status: 'succeeded', state: 'finished.succeeded', steps: 1, lease_owner: null }])
    const transitions = await db.query('select seq, from_state, event, to_state from transitions where run_id = $1 order by seq', [result.runId])
    expect(transitions).toEqual([
      { seq: 1, from_state: 'dispatching', event: 'PROVIDER_OK', to_state: 'acting' },
      { seq: 2, from_state: 'acting', event: 'TOOLS_DONE', to_state: 'verifying' },
      { seq: 3, from_state: 'verifying', event: 'VERIFY_PASSED', to_state: 'finished.succeeded' }
    ])
    expect(await db.query('select step, attempt, reason, outcome from attempts where run_id = $1', [result.runId])).toEqual([
      { step: 1, attempt: 0, reason: 'initial', outcome: 'ok' }
    ])
    const steps = await db.query<{ step: number; tool_calls_json: string }>('select step, tool_calls_json from steps where run_id = $1', [result.runId])
    expect(steps).toHaveLength(1)
    expect(JSON.parse(steps[0]!.tool_calls_json)).toEqual([expect.objectContaining({ name: 'write_file' })])
    expect(await db.query('select name, status from tool_effects where run_id = $1', [result.runId])).toEqual([{ name: 'write_file', status: 'completed' }])

    const listed = await cli(dir, ['runs', '--json'], db.url)
    expect(listed.code, listed.stderr).toBe(0)
    expect(lastJson(listed)).toEqual([
      {
        id: result.runId,
        status: 'succeeded',
        goal: 'Write DONE into out.txt',
        parentId: null,
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
        usage: result.usage
      }
    ])
    const show = await cli(dir, ['show', result.runId, '--json'], db.url)
    expect(show.code, show.stderr).toBe(0)
    const trace = lastJson<Trace>(show)
    expect(trace.run).toMatchObject({ id: result.runId, status: 'succeeded', parentId: null })
    expect(trace.transitions.map((t) => `${t.seq}:${t.from}>${t.to}`)).toEqual(['1:dispatching>acting', '2:acting>verifying', '3:verifying>finished.succeeded'])
    expect(trace.receipts).toEqual([
      expect.objectContaining({ step: 1, winner: 0, attempts: [expect.objectContaining({ provider: 'primary', reason: 'initial', outcome: 'ok' })] })
    ])
  })

  it('pauses for approval (exit 3), then approve and resume finish the run', async () => {
    // No rule covers the write: it is an `ask`, and `defer` persists it and pauses.
    const { dir, file, ws } = await setup([writeDone], { approval: 'defer' })
    const db = await freshDatabase()

    const paused = await cli(dir, ['run', file, '--json'], db.url)
    expect(paused.code, paused.stderr).toBe(3)
    const { runId } = lastJson<{ runId: string; status: string }>(paused)
    expect(lastJson(paused)).toMatchObject({ status: 'awaiting_approval' })
    expect(existsSync(path.join(ws, 'out.txt'))).toBe(false)
    expect(await db.query('select status, lease_owner from runs where id = $1', [runId])).toEqual([{ status: 'awaiting_approval', lease_owner: null }])
    expect(await db.query('select act, target, status from approvals where run_id = $1', [runId])).toEqual([
      { act: 'write', target: 'out.txt', status: 'pending' }
    ])

    const approve = await cli(dir, ['approve', runId, '--json'], db.url)
    expect(approve.code, approve.stderr).toBe(0)
    expect(lastJson(approve)).toEqual([expect.objectContaining({ act: 'write', target: 'out.txt', status: 'approved' })])

    const resumed = await cli(dir, ['resume', runId, '--json'], db.url)
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson(resumed)).toEqual({ runId, status: 'succeeded', steps: 1, usage: { inputTokens: expect.any(Number), outputTokens: expect.any(Number) } })
    expect(readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('DONE\n')
    expect(mock!.requests).toHaveLength(1)
    expect(await db.query('select act, target, status, source from approvals where run_id = $1', [runId])).toEqual([
      { act: 'write', target: 'out.txt', status: 'approved', source: 'cli' }
    ])
    const transitions = await db.query<{ to_state: string }>('select to_state from transitions where run_id = $1 order by seq', [runId])
    expect(transitions.map((t) => t.to_state)).toEqual(['acting', 'awaitingApproval', 'acting', 'verifying', 'finished.succeeded'])
    expect(await gaplessTransitions(db)).toEqual(new Map([[runId, 5]]))
  })

  it('resumes a run SIGKILLed mid-dispatch under the same id, settling the lost attempt unknown', async () => {
    const { dir, ws, db, runId, pid } = await killedMidDispatch()
    const [before] = await db.query<{ status: string; lease_owner: string }>('select status, lease_owner from runs where id = $1', [runId])
    expect(before).toEqual({ status: 'running', lease_owner: expect.stringContaining(`/${pid}/`) })

    const resumed = await cli(dir, ['resume', runId, '--json'], db.url)
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson(resumed)).toEqual({ runId, status: 'succeeded', steps: 1, usage: { inputTokens: expect.any(Number), outputTokens: expect.any(Number) } })
    expect(readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('DONE\n')
    expect(await db.query('select attempt, reason, outcome from attempts where run_id = $1 order by attempt', [runId])).toEqual([
      { attempt: 0, reason: 'initial', outcome: 'unknown' },
      { attempt: 1, reason: 'retry', outcome: 'ok' }
    ])
    expect(await db.query('select status, lease_owner, lease_token::int as token from runs')).toEqual([{ status: 'succeeded', lease_owner: null, token: 2 }])
    expect(await gaplessTransitions(db)).toEqual(new Map([[runId, 4]]))
    const transitions = await db.query<{ event: string }>('select event from transitions where run_id = $1 order by seq', [runId])
    expect(transitions.map((t) => t.event)).toEqual(['DISPATCH_LOST', 'PROVIDER_OK', 'TOOLS_DONE', 'VERIFY_PASSED'])
  })
})

// docs/durability.md, "How a run is stored": the 2026-12-01T170000 migration changes how a commit
// reaches the tables and how their rules are checked, not what they hold.
describe('a PostgreSQL store written before the step-commit migration', () => {
  it('opens, shows a run killed mid-dispatch as it was, and resumes it, settling the lost attempt unknown', async () => {
    // A store made by the chain (as the releases before the baselines made one), which the chain can walk back.
    const { dir, ws, db, runId } = await killedMidDispatch({ byChain: true })
    // The schema as the version before the migration left it, under the rows the run wrote.
    const kysely = new Kysely<Record<string, never>>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: db.url, max: 1 }) }) })
    try {
      expect((await new Migrator({ db: kysely, provider: migrationProvider }).migrateTo('2026-12-01T160000-run-log')).error).toBeUndefined()
    } finally {
      await kysely.destroy()
    }
    expect(await db.query("select indexname from pg_indexes where indexname = 'attempts_pending_idx'")).toHaveLength(1)

    const shown = await cli(dir, ['show', runId, '--json'], db.url)
    expect(shown.code, shown.stderr).toBe(0)
    const trace = lastJson<Trace>(shown)
    expect(trace.run).toMatchObject({ id: runId, status: 'running' })
    expect(trace.receipts).toMatchObject([{ step: 1, attempts: [{ provider: 'primary', reason: 'initial', outcome: 'pending' }], winner: null }])
    expect(await db.query("select count(*)::int as n from kysely_migration where name = '2026-12-01T170000-postgres-step-commit'")).toEqual([{ n: 1 }])

    const resumed = await cli(dir, ['resume', runId, '--json'], db.url)
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(lastJson(resumed)).toEqual({ runId, status: 'succeeded', steps: 1, usage: { inputTokens: expect.any(Number), outputTokens: expect.any(Number) } })
    expect(readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('DONE\n')
    expect(await db.query('select attempt, reason, outcome from attempts where run_id = $1 order by attempt', [runId])).toEqual([
      { attempt: 0, reason: 'initial', outcome: 'unknown' },
      { attempt: 1, reason: 'retry', outcome: 'ok' }
    ])
    expect(await gaplessTransitions(db)).toEqual(new Map([[runId, 4]]))
    const after = lastJson<Trace>(await cli(dir, ['show', runId, '--json'], db.url))
    expect(after.run.status).toBe('succeeded')
    expect(after.transitions.map((t) => t.event)).toEqual(['DISPATCH_LOST', 'PROVIDER_OK', 'TOOLS_DONE', 'VERIFY_PASSED'])
  })
})

const repo = path.join(path.dirname(fileURLToPath(import.meta.url)), '..')

/** Runs an example script as a user would (`node examples/...`), with only AGENTVISOR_DB chosen. */
const runExample = (script: string, db: string, nodeArgs: ReadonlyArray<string> = []): Promise<CliResult> =>
  new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env, AGENTVISOR_DB: db }
    for (const key of Object.keys(env)) if (key.startsWith('AGENTVISOR_NATS')) delete env[key]
    // Tethered: the example, and through it every process it starts, ends with the test process.
    const child = spawnTethered(process.execPath, [...nodeArgs, path.join(repo, script)], {
      cwd: tempDir('agentvisor-example-'),
      env,
      stdio: ['ignore', 'pipe', 'pipe']
    })
    let stdout = ''
    let stderr = ''
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })

describe('the examples on PostgreSQL, chosen by AGENTVISOR_DB alone', () => {
  it('examples/demo.mjs runs its single agent into an empty database', async () => {
    const db = await freshDatabase({ migrated: false })
    const demo = await runExample('examples/demo.mjs', db.url)
    expect(demo.code, demo.stderr).toBe(0)
    const result = JSON.parse(/^result: (.*)$/m.exec(demo.stdout)![1]!) as { runId: string; status: string }
    expect(result).toMatchObject({ status: 'succeeded' })
    expect(await db.query('select id, status, parent_id from runs')).toEqual([{ id: result.runId, status: 'succeeded', parent_id: null }])
    expect((await gaplessTransitions(db)).get(result.runId)).toBeGreaterThan(2)
    // Its `show` printed the trace it read back from the database, which it names without the password.
    expect(demo.stdout).toContain(`run ${result.runId}  succeeded`)
    expect(demo.stdout).toContain(`the store is ${db.url.replace(/:[^:@/]+@/, ':***@')}.`)
    expect(demo.stdout + demo.stderr).not.toContain(new URL(db.url).password)
  })

  it('examples/api-run.ts runs its task through the TypeScript API into the database', async () => {
    const db = await freshDatabase({ migrated: false })
    // As `npx tsx examples/api-run.ts` runs it.
    const example = await runExample('examples/api-run.ts', db.url, [
      '--import',
      pathToFileURL(path.join(repo, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href
    ])
    expect(example.code, example.stderr).toBe(0)
    const [run] = await db.query<{ id: string; status: string; steps: number }>('select id, status, steps from runs')
    expect(run).toMatchObject({ status: 'succeeded', steps: 3 })
    expect(example.stdout).toContain(run!.id)
    expect(await db.query('select count(*)::int as n from attempts where run_id = $1', [run!.id])).toEqual([{ n: 3 }])
    expect((await gaplessTransitions(db)).get(run!.id)).toBeGreaterThan(3)
  })

  it('examples/parent-children/demo.mjs runs the parent and its three children on two workers, all in the database', async () => {
    // Empty: the two workers and the parent start at once, and all three migrate it.
    const db = await freshDatabase({ migrated: false })
    const demo = await runExample('examples/parent-children/demo.mjs', db.url)
    expect(demo.code, demo.stderr).toBe(0)
    const runs = await db.query<{ id: string; status: string; parent_id: string | null; goal: string }>(
      'select id, status, parent_id, goal from runs order by goal'
    )
    const parent = runs.find((r) => r.parent_id === null)!
    expect(parent).toMatchObject({ status: 'succeeded' })
    expect(runs.filter((r) => r.parent_id === parent.id).map((r) => [r.goal, r.status])).toEqual([
      ['Write part one of the report into part.txt', 'succeeded'],
      ['Write part three of the report into part.txt', 'succeeded'],
      ['Write part two of the report into part.txt', 'succeeded']
    ])
    expect(runs).toHaveLength(4)
    await gaplessTransitions(db)
    expect(demo.stderr.match(/agentvisor worker: run \S+ succeeded/g)).toHaveLength(3)
  })

  it('examples/parent-children/demo.mjs killed with SIGKILL mid-run leaves none of its processes running', async () => {
    const db = await freshDatabase()
    const env: NodeJS.ProcessEnv = { ...process.env, AGENTVISOR_DB: db.url }
    for (const key of Object.keys(env)) if (key.startsWith('AGENTVISOR_NATS')) delete env[key]
    // Not tethered itself: the test kills it as a user's terminal would, and SIGKILL runs no handler.
    const demo = spawn(process.execPath, [path.join(repo, 'examples/parent-children/demo.mjs')], {
      cwd: tempDir('agentvisor-example-'),
      env,
      stdio: ['ignore', 'ignore', 'pipe']
    })
    let stderr = ''
    demo.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    let started: ReturnType<typeof descendants> = []
    // Whatever the verdict, nothing of it outlives the test (a timed-out test runs no finally).
    onTestFinished(() => killAll([demo.pid!, ...started.map((p) => p.pid)]))
    // Mid-run: a worker has taken a child (each child's first answer takes 400 ms).
    await waitFor(() => (/worker-\d: agentvisor worker: run \S+ started/.test(stderr) ? true : undefined), 'a worker to start a child', 60_000)
    started = descendants(demo.pid!)
    const alive = started.map((p) => p.command)
    expect(alive.filter((c) => /^\S*nats-server /.test(c))).toHaveLength(1)
    expect(alive.filter((c) => / worker --nats /.test(c))).toHaveLength(2)
    expect(alive.filter((c) => / run \S+task\.json --nats /.test(c))).toHaveLength(1)
    expect(await accepts(4011)).toBe(true) // the mock LLM, in the demo's own process
    demo.kill('SIGKILL')
    // The verdict is whether they end: the deadline is only how long to wait for it.
    await waitFor(() => (started.every((p) => isGone(p.pid)) ? true : undefined), 'every process of the demo to end', 30_000).catch(() => {
      throw new Error(
        `still running: ${started
          .filter((p) => !isGone(p.pid))
          .map((p) => `${p.pid} ${p.command.replace(/:[^:@/]+@/g, ':***@')}`)
          .join('; ')}`
      )
    })
    expect(await accepts(4011)).toBe(false)
  }, 120_000)
})
