import { spawnTethered } from '@agentvisor/cli'
import { randomUUID } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { freePort } from './support/free-port.js'
import { lastJson, runCli, taskInTempDir, tempDir, waitFor } from './support/cli.js'
import { mockLlmPerTest } from './support/mock-llm.js'
import { accepts } from './support/tcp.js'

const startMock = mockLlmPerTest()

// Not a name that looks like a credential (docs/task-file.md): `exec` commands see it, so a
// command printing it exercises the redaction of tool results, not the environment filter.
const KEY_ENV = 'AGENTVISOR_TEST_LLM_KEY'

/** Every byte of the SQLite store: the database, its write-ahead log and its shared memory. */
const storeBytes = (db: string): string =>
  [db, `${db}-wal`, `${db}-shm`]
    .filter((file) => existsSync(file))
    .map((file) => readFileSync(file).toString('latin1'))
    .join('\n')

describe('an API key never leaves the process', () => {
  for (const [kind, label, suffix] of [
    ['openai', 'a newline', '\n'],
    ['openai', 'a space', ' '],
    ['openai', 'a tab', '\t'],
    ['anthropic', 'a newline', '\n']
  ] as const) {
    it(`is in no store file, no show output and no run output when a 401 body echoes a key ending in ${label} (${kind})`, async () => {
      // A `/` and a `+` make the key's JSON and URL forms differ from it.
      const key = `sk-test/${randomUUID()}+k`
      const raw = `${key}${suffix}`
      const mock = await startMock([
        // The model reads the key from the environment and from its parent's, like a curious agent would.
        {
          toolCalls: [{ name: 'exec', arguments: { command: `printf 'env=%s;' "$${KEY_ENV}"; tr '\\0' '\\n' < /proc/$PPID/environ | grep ${KEY_ENV}` } }]
        },
        { error: { status: 401, message: 'Incorrect API key provided', echoAuthorization: true } }
      ])
      const { db, task } = taskInTempDir({
        goal: 'Report the environment',
        workspace: 'ws',
        providers: [{ name: 'p', kind, baseUrl: mock.url, model: 'm', apiKeyEnv: KEY_ENV }],
        limits: { maxSteps: 5, timeoutMs: 60_000 },
        approval: 'auto'
      })

      const run = await runCli(['run', task, '--json', '--db', db], { env: { [KEY_ENV]: raw } })
      expect(run.code, run.stderr).toBe(1)
      const result = lastJson(run)
      // The server did see the key and echo it: what was stored is the redacted echo.
      expect(mock.requests.map((r) => r.hasAuthorization)).toEqual([true, true])
      expect(result).toMatchObject({ status: 'failed', error: { kind: 'auth', httpStatus: 401 } })
      // Both SDKs send the key as a bearer token.
      expect(String((result['error'] as { message: string }).message)).toContain('Authorization: Bearer [redacted]')

      const show = await runCli(['show', String(result['runId']), '--db', db])
      const showJson = await runCli(['show', String(result['runId']), '--json', '--db', db])
      expect(show.code).toBe(0)
      expect(showJson.code).toBe(0)
      const trace = lastJson<{ steps: Array<{ results: string[] }> }>(showJson)
      // The variable never reached the command (docs/task-file.md, "The environment of commands");
      // what it read of agentvisor's own environment was redacted in the tool result.
      expect(trace.steps[0]!.results[0]).toMatch(/env=;/)
      expect(trace.steps[0]!.results[0]).toMatch(new RegExp(`${KEY_ENV}=\\[redacted\\]`))

      const sinks = { store: storeBytes(db), run: run.stdout + run.stderr, show: show.stdout + show.stderr, showJson: showJson.stdout + showJson.stderr }
      for (const [sink, text] of Object.entries(sinks)) {
        expect(text.includes(key), `${sink} holds the trimmed key`).toBe(false)
        expect(text.includes(raw), `${sink} holds the raw key`).toBe(false)
        expect(text.includes(encodeURIComponent(key)), `${sink} holds the URL-encoded key`).toBe(false)
      }
    })
  }
})

describe('URLs with credentials', () => {
  for (const command of ['run', 'worker'] as const) {
    it(`${command} --nats with a password in the URL fails with one line that masks the password`, async () => {
      const port = await freePort()
      const { db, task } = taskInTempDir({ goal: 'x', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [] }] })
      const url = `nats://svc:s3cretpw@127.0.0.1:${port}`
      const args = command === 'run' ? ['run', task, '--nats', url, '--db', db] : ['worker', '--nats', url, '--db', db]
      const result = await runCli(args)
      expect(result.code).toBe(2)
      expect(result.stdout + result.stderr).not.toContain('s3cretpw')
      const lines = result.stderr.trim().split('\n')
      expect(lines.at(-1)).toMatch(new RegExp(`^agentvisor: cannot connect to NATS at nats://svc:\\*\\*\\*@127\\.0\\.0\\.1:${port}`))
      // Only the error itself, no stack trace.
      expect(result.stderr).not.toMatch(/\n\s+at /)
    })
  }
})

describe('NATS credentials in the URL', () => {
  it('authenticate a worker to a server that requires them, and its log line masks the password', async () => {
    const port = await freePort()
    const server = spawnTethered(
      'nats-server',
      ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', tempDir('agentvisor-nats-auth-'), '--user', 'svc', '--pass', 's3cretpw'],
      { stdio: 'ignore' }
    )
    try {
      await waitFor(async () => ((await accepts(port)) ? true : undefined), 'the authenticating nats-server')
      const dir = tempDir()
      let workerPid: number | undefined
      const worker = runCli(['worker', '--nats', `nats://svc:s3cretpw@127.0.0.1:${port}`, '--db', path.join(dir, 'av.db')], {
        // Its own subjects and queue: the shared server of the other tests is not this one anyway.
        env: { AGENTVISOR_NATS_PREFIX: 'secrets', AGENTVISOR_NATS_STREAM: 'SECRETS_RUNS' },
        onSpawn: (pid) => (workerPid = pid),
        onStderr: (text) => {
          // Serving means connected: nats-server refuses a connection without the credentials.
          // It is stopped as soon as it serves; whether its exit is clean is another test's business.
          if (text.includes('serving child runs')) process.kill(workerPid!, 'SIGKILL')
        }
      })
      const result = await worker
      expect(result.stderr).toContain(`serving child runs and control requests from nats://svc:***@127.0.0.1:${port}`)
      expect(result.stdout + result.stderr).not.toContain('s3cretpw')
    } finally {
      server.kill('SIGTERM')
    }
  })
})
