import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import * as path from 'node:path'
import type { MockLlm } from '@agentvisor/cli'
import { countingServer, connectCommand } from './support/tcp.js'
import { afterEach, describe, expect, it } from 'vitest'
import { lastJson, runCli, waitFor, mockTaskFolder } from './support/cli.js'
import { killMatching, processesMatching } from './support/processes.js'
import { mockLlmPerTest } from './support/mock-llm.js'

const startMock = mockLlmPerTest()
let mock: MockLlm | undefined
const markers: string[] = []
const probes: string[] = []

afterEach(async () => {
  // Safety nets only: what a failing test may leave behind.
  for (const marker of markers.splice(0)) killMatching(marker)
  for (const file of probes.splice(0)) rmSync(file, { force: true })
})

const exec = (command: string) => ({ toolCalls: [{ name: 'exec', arguments: { command } }] })

const setup = async (steps: unknown[], task: Record<string, unknown> | ((url: string) => Record<string, unknown>) = {}) => {
  mock = await startMock(steps)
  const overrides = typeof task === 'function' ? task(mock.url) : task
  return mockTaskFolder(mock.url, { limits: { maxSteps: 5, timeoutMs: 60_000 }, approval: 'auto', ...overrides })
}

/** Every tool result the model was sent, in order (the last request carries the whole conversation). */
const toolResults = (m: MockLlm): string[] => {
  const last = m.requests.at(-1)!.body as { messages: Array<{ role: string; content: string }> }
  return last.messages.filter((message) => message.role === 'tool').map((message) => message.content)
}

/** The SQLite files of a store: the database, its WAL and shared memory. */
const storeBytes = (dir: string): Buffer[] =>
  readdirSync(dir)
    .filter((name) => name.startsWith('av.db'))
    .map((name) => readFileSync(path.join(dir, name)))

describe('the environment of exec in a run', () => {
  it("keeps every provider's key variable out of the command, the tool results and the store, while other variables reach it", async () => {
    const key = 'sk-rt-llm-0123456789-never-shown'
    const fallbackKey = 'llm-auth-9876543210-never-shown'
    const visible = 'unrelated-variable-reaches-the-command'
    const writeDone = { toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }
    const { dir, file, db } = await setup([exec('env'), writeDone], (url) => ({
      // The fallback is never dispatched to: it only names a second key variable.
      providers: [
        { name: 'primary', kind: 'openai', baseUrl: url, model: 'm', apiKeyEnv: 'RT_LLM_KEY' },
        { name: 'fallback', kind: 'openai', baseUrl: url, model: 'm', apiKeyEnv: 'LLM_AUTH' }
      ]
    }))
    const run = await runCli(['run', file, '--json', '--db', db], { env: { RT_LLM_KEY: key, LLM_AUTH: fallbackKey, AV_VISIBLE: visible } })
    expect(run.code, run.stderr).toBe(0)
    expect(mock!.requests[0]!.hasAuthorization).toBe(true)
    const [envOutput] = toolResults(mock!)
    expect(envOutput).toContain(`AV_VISIBLE=${visible}`)
    expect(envOutput).not.toContain('RT_LLM_KEY')
    expect(envOutput).not.toContain('LLM_AUTH')
    const requests = JSON.stringify(mock!.requests.map((r) => r.body))
    expect(requests).not.toContain(key)
    expect(requests).not.toContain(fallbackKey)
    const files = storeBytes(dir)
    // The env output itself is stored: the check below looks where the key would be.
    expect(files.some((bytes) => bytes.includes(visible))).toBe(true)
    for (const bytes of files) {
      expect(bytes.includes(key)).toBe(false)
      expect(bytes.includes(fallbackKey)).toBe(false)
    }
  })
})

describe('a run under sandbox exec "bwrap"', () => {
  it('cannot write /etc or reach a server on 127.0.0.1 from exec or verify.command, while it writes its workspace', async () => {
    const { port, accepted } = await countingServer()
    const etc = `/etc/agentvisor-run-probe-${process.pid}`
    probes.push(etc)
    const { file, db, ws } = await setup([exec(`echo x > ${etc}`), exec(connectCommand(port)), exec('echo DONE > out.txt'), { text: 'done' }], {
      sandbox: { exec: 'bwrap' },
      verify: { allOf: [{ fileContains: { path: 'out.txt', text: 'DONE' } }, { command: { run: connectCommand(port) } }] },
      limits: { maxSteps: 4, timeoutMs: 60_000 }
    })
    const run = await runCli(['run', file, '--json', '--db', db])
    expect(run.code, run.stderr).toBe(1)
    expect(lastJson(run)).toMatchObject({ status: 'step_cap' })
    const [etcWrite, connect, workspaceWrite] = toolResults(mock!)
    expect(etcWrite).toContain('Read-only file system')
    expect(existsSync(etc)).toBe(false)
    expect(connect).toContain('ECONNREFUSED')
    expect(workspaceWrite).toMatch(/^exit code: 0/)
    expect(readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('DONE\n')
    // The model was told why the contract is not met: the verify command could not connect either.
    const last = mock!.requests.at(-1)!.body as { messages: Array<{ role: string; content: string }> }
    expect(JSON.stringify(last.messages)).toContain('ECONNREFUSED')
    expect(accepted()).toBe(0)
  })

  it('without the sandbox, the same connections from exec and verify.command work', async () => {
    const { port, accepted } = await countingServer()
    const { file, db } = await setup([exec(connectCommand(port)), exec('echo DONE > out.txt')], {
      verify: { allOf: [{ fileContains: { path: 'out.txt', text: 'DONE' } }, { command: { run: connectCommand(port) } }] }
    })
    const run = await runCli(['run', file, '--json', '--db', db])
    expect(run.code, run.stderr).toBe(0)
    expect(toolResults(mock!)[0]).toContain('connected')
    // The exec, then the verify command after step 2 (after step 1, allOf stops at the missing out.txt).
    expect(accepted()).toBe(2)
  })

  it('cancelled on SIGINT during an exec kills the sandboxed command and everything it started', async () => {
    const marker = '30.0451'
    markers.push(marker)
    const { file, db, ws } = await setup([exec(`sleep ${marker} & setsid sleep ${marker} & sleep ${marker} && echo late > late.txt`)], {
      sandbox: { exec: 'bwrap' }
    })
    let pid = 0
    const done = runCli(['run', file, '--json', '--db', db], { onSpawn: (p) => (pid = p) })
    // The three sleeps; bwrap's and the shell's command lines carry the marker too.
    await waitFor(() => (processesMatching(`sleep ${marker}`).length >= 3 ? true : undefined), 'the sandboxed sleeps')
    process.kill(pid, 'SIGINT')
    const result = await done
    expect(result.code).toBe(1)
    expect(lastJson(result)).toMatchObject({ status: 'cancelled', error: { kind: 'cancelled' } })
    expect(processesMatching(`sleep ${marker}`)).toEqual([])
    expect(existsSync(path.join(ws, 'late.txt'))).toBe(false)
  })

  it('timed out during an exec kills the sandboxed command and everything it started', async () => {
    const marker = '30.0453'
    markers.push(marker)
    const { file, db, ws } = await setup([exec(`sleep ${marker} & echo started > started.txt; sleep ${marker}`)], {
      sandbox: { exec: 'bwrap' },
      limits: { timeoutMs: 1500 }
    })
    const result = await runCli(['run', file, '--json', '--db', db])
    expect(result.code).toBe(1)
    expect(lastJson(result)).toMatchObject({ status: 'timed_out', error: { kind: 'timeout' } })
    expect(readFileSync(path.join(ws, 'started.txt'), 'utf8')).toBe('started\n')
    expect(processesMatching(`sleep ${marker}`)).toEqual([])
  })

  it('exits 2 with one line and runs nothing on a host without bwrap', async () => {
    const { dir, file, db, ws } = await setup([exec('echo ran > ran.txt')], { sandbox: { exec: 'bwrap' } })
    const run = await runCli(['run', file, '--json', '--db', db], { env: { PATH: path.join(dir, 'no-bin') } })
    expect(run.code).toBe(2)
    const lines = run.stderr.trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^agentvisor: sandbox\.exec: bwrap \(bubblewrap\) is not installed/)
    expect(mock!.requests).toHaveLength(0)
    expect(existsSync(path.join(ws, 'ran.txt'))).toBe(false)
  })
})
