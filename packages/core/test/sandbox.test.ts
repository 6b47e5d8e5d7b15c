import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { Effect, Either, Fiber } from 'effect'
import { countingServer, connectCommand } from '../../../test/support/tcp.js'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  type CommandSandbox,
  commandEnv,
  openWorkspace,
  parseTaskContract,
  runCommand,
  runCommandSettings,
  runTool,
  sandboxUnavailable,
  verify,
  type Workspace
} from '@agentvisor/core'

const BWRAP: CommandSandbox = { exec: 'bwrap', network: false }

let base: string
let ws: Workspace
const markers: string[] = []
/** Files outside the workspace the tests try to create; removed in case a broken sandbox let one through. */
const probes: string[] = []
const probe = (name: string): string => {
  const file = `/etc/agentvisor-${name}-probe-${process.pid}`
  probes.push(file)
  return file
}

beforeEach(async () => {
  base = realpathSync(mkdtempSync(path.join(tmpdir(), 'agentvisor-sandbox-')))
  ws = await Effect.runPromise(openWorkspace(path.join(base, 'ws')))
})

afterEach(async () => {
  // Safety net only: a failing test must not leave sleeps behind.
  for (const marker of markers.splice(0)) for (const pid of liveMatching(marker)) process.kill(pid, 'SIGKILL')
  for (const file of probes.splice(0)) rmSync(file, { force: true })
  rmSync(base, { recursive: true, force: true })
})

/** Host pids of live processes whose command line contains `marker` (sandboxed ones included: /proc here is the host's). */
const liveMatching = (marker: string): number[] =>
  readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry) && Number(entry) !== process.pid)
    .flatMap((entry) => {
      try {
        const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ')
        const state = /State:\s+(\S)/.exec(readFileSync(`/proc/${entry}/status`, 'utf8'))?.[1]
        return cmdline.includes(marker) && state !== 'Z' ? [Number(entry)] : []
      } catch {
        return [] // ended while we looked
      }
    })

const run = (command: string, sandbox: CommandSandbox | undefined, timeoutMs = 20_000) =>
  Effect.runPromise(runCommand({ command, cwd: ws.root, timeoutMs, sandbox }))

const waitUntil = async (check: () => boolean, what: string): Promise<void> => {
  const until = Date.now() + 20_000
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

describe('commands under bubblewrap', () => {
  it('cannot write outside the workspace, while writing inside it works', async () => {
    const etc = probe('sandbox')
    const outside = await run(`echo x > ${etc}`, BWRAP)
    expect(outside.exitCode).not.toBe(0)
    expect(outside.stderr).toContain('Read-only file system')
    expect(existsSync(etc)).toBe(false)
    const inside = await run('mkdir -p sub && echo inside > sub/made.txt && pwd', BWRAP)
    expect(inside).toMatchObject({ exitCode: 0, stdout: `${ws.root}\n` })
    expect(readFileSync(path.join(ws.root, 'sub', 'made.txt'), 'utf8')).toBe('inside\n')
  })

  it('get a private /tmp that leaves nothing on the host', async () => {
    const name = `agentvisor-sandbox-tmp-${process.pid}`
    const result = await run(`echo t > /tmp/${name} && cat /tmp/${name}`, BWRAP)
    expect(result).toMatchObject({ exitCode: 0, stdout: 't\n' })
    expect(existsSync(path.join('/tmp', name))).toBe(false)
  })

  it('cannot remount the filesystem read-write, even when agentvisor runs as root', async () => {
    const etc = probe('remount')
    const result = await run(`mount -o remount,rw / && echo x > ${etc}`, BWRAP)
    expect(result.exitCode).not.toBe(0)
    expect(existsSync(etc)).toBe(false)
  })

  it('cannot read the environment of the process that started them, which an unconfined command can', async () => {
    const read = `cat /proc/${process.pid}/environ | tr '\\0' '\\n' | grep -c '^PATH='`
    expect(await run(read, undefined)).toMatchObject({ exitCode: 0, stdout: '1\n' })
    const confined = await run(read, BWRAP)
    expect(confined.exitCode).not.toBe(0)
    expect(confined.stdout).toBe('0\n')
  })

  it('cannot open a TCP connection to 127.0.0.1 unless network is true; unconfined the same connection works', async () => {
    const { port, accepted } = await countingServer()
    const confined = await run(connectCommand(port), BWRAP)
    expect(confined).toMatchObject({ exitCode: 1, stdout: 'ECONNREFUSED\n' })
    expect(accepted()).toBe(0)
    expect(await run(connectCommand(port), undefined)).toMatchObject({ exitCode: 0, stdout: 'connected\n' })
    expect(accepted()).toBe(1)
    expect(await run(connectCommand(port), { exec: 'bwrap', network: true })).toMatchObject({ exitCode: 0, stdout: 'connected\n' })
    expect(accepted()).toBe(2)
  })

  it('still kill the whole command, background jobs included, on timeout', async () => {
    const marker = '31.0411'
    markers.push(marker)
    const result = await run(`sleep ${marker} & echo started > started.txt; sleep ${marker}; wait`, BWRAP, 1_000)
    expect(existsSync(path.join(ws.root, 'started.txt'))).toBe(true)
    expect(result.timedOut).toBe(true)
    expect(liveMatching(`sleep ${marker}`)).toEqual([])
  })

  it('are gone, even a process that left the group with setsid, once an interrupted call returns', async () => {
    const marker = '31.0413'
    markers.push(marker)
    const fiber = Effect.runFork(
      runCommand({ command: `setsid sleep ${marker} & sleep ${marker} & sleep ${marker}; wait`, cwd: ws.root, timeoutMs: 60_000, sandbox: BWRAP })
    )
    // The two background sleeps and the foreground one; bwrap's and the shell's command lines carry the marker too.
    await waitUntil(() => liveMatching(`sleep ${marker}`).length >= 3, 'the sleeps to start')
    await Effect.runPromise(Fiber.interrupt(fiber))
    expect(liveMatching(`sleep ${marker}`)).toEqual([])
  })

  it('run verify.command confined as well', async () => {
    const etc = probe('verify')
    const result = await Effect.runPromise(verify(ws, { command: { run: `echo x > ${etc}` } }, { sandbox: BWRAP }))
    expect(result.passed).toBe(false)
    expect(result.detail).toContain('Read-only file system')
    expect(existsSync(etc)).toBe(false)
    const inside = await Effect.runPromise(verify(ws, { command: { run: 'echo x > ok.txt' } }, { sandbox: BWRAP }))
    expect(inside.passed).toBe(true)
    expect(existsSync(path.join(ws.root, 'ok.txt'))).toBe(true)
  })

  it('run exec confined when the tool call carries the sandbox', async () => {
    const { port, accepted } = await countingServer()
    const outcome = await Effect.runPromise(runTool(ws, { name: 'exec', arguments: JSON.stringify({ command: connectCommand(port) }) }, { sandbox: BWRAP }))
    expect(outcome.ok).toBe(false)
    expect(outcome.output).toContain('ECONNREFUSED')
    expect(accepted()).toBe(0)
  })

  it('never run unconfined when bwrap is not installed: the command is not started and says why', async () => {
    const saved = process.env['PATH']
    process.env['PATH'] = path.join(base, 'no-bin')
    try {
      const result = await run('echo ran > ran.txt', BWRAP)
      expect(result.exitCode).toBeNull()
      expect(result.stderr).toMatch(/^Cannot start command: bwrap \(bubblewrap\) is not installed/)
      expect(await sandboxUnavailable(BWRAP)).toMatch(/^bwrap \(bubblewrap\) is not installed/)
    } finally {
      process.env['PATH'] = saved
    }
    expect(existsSync(path.join(ws.root, 'ran.txt'))).toBe(false)
  })

  it('are reported available on a host where bwrap works', async () => {
    expect(await sandboxUnavailable(BWRAP)).toBeUndefined()
    expect(await sandboxUnavailable(undefined)).toBeUndefined()
  })
})

describe("the environment of a run's commands", () => {
  it('leaves out every variable a provider names in apiKeyEnv, whatever its name, and the extra names given', () => {
    const host = { PATH: '/bin', RT_LLM_KEY: 'k1', LLM_AUTH: 'k2', MCP_FROM_ENV: 'k3', OPENAI_API_KEY: 'k4', UNRELATED: 'kept' }
    const contract = {
      providers: [
        { name: 'a', kind: 'openai', model: 'm', apiKeyEnv: 'RT_LLM_KEY' },
        { name: 'b', kind: 'anthropic', model: 'm', apiKeyEnv: 'LLM_AUTH' }
      ] as const
    }
    const settings = runCommandSettings(contract, ['MCP_FROM_ENV'], host)
    expect(settings.env).toEqual({ PATH: '/bin', UNRELATED: 'kept' })
    expect(settings.sandbox).toBeUndefined()
    expect(runCommandSettings({ ...contract, sandbox: BWRAP }, [], host).sandbox).toEqual(BWRAP)
    // Without the names, only the credential-looking name goes: what the contract adds is the point.
    expect(commandEnv(host)).toEqual({ PATH: '/bin', RT_LLM_KEY: 'k1', LLM_AUTH: 'k2', MCP_FROM_ENV: 'k3', UNRELATED: 'kept' })
  })

  it('reaches exec without the named key while an unrelated variable gets through', async () => {
    const settings = runCommandSettings({ providers: [{ name: 'a', kind: 'openai', model: 'm', apiKeyEnv: 'RT_LLM_KEY' }] }, [], {
      ...process.env,
      RT_LLM_KEY: 'sk-rt-llm-never-shown',
      AV_UNRELATED: 'visible-value'
    })
    const outcome = await Effect.runPromise(runTool(ws, { name: 'exec', arguments: JSON.stringify({ command: 'env' }) }, settings))
    expect(outcome.ok).toBe(true)
    expect(outcome.output).toContain('AV_UNRELATED=visible-value')
    expect(outcome.output).not.toContain('sk-rt-llm-never-shown')
  })
})

describe('the sandbox field of a task', () => {
  const task = (sandbox?: unknown) => ({
    goal: 'g',
    workspace: 'ws',
    providers: [{ name: 'p', kind: 'scripted', steps: [] }],
    ...(sandbox === undefined ? {} : { sandbox })
  })
  const parse = (sandbox?: unknown) => parseTaskContract(task(sandbox), '/base')

  it('defaults to unconfined, and to no network under bwrap', () => {
    expect(Either.getOrThrow(parse()).sandbox).toBeUndefined()
    expect(Either.getOrThrow(parse({ exec: 'none' })).sandbox).toBeUndefined()
    expect(Either.getOrThrow(parse({ exec: 'bwrap' })).sandbox).toEqual({ exec: 'bwrap', network: false })
    expect(Either.getOrThrow(parse({ exec: 'bwrap', network: true })).sandbox).toEqual({ exec: 'bwrap', network: true })
  })

  it('refuses network without bwrap and an unknown exec, naming the field', () => {
    const noBwrap = parse({ exec: 'none', network: false })
    expect(Either.isLeft(noBwrap) && noBwrap.left.message).toBe('sandbox.network: applies only with exec "bwrap"')
    const unknown = parse({ exec: 'docker' })
    expect(Either.isLeft(unknown) && unknown.left.field).toBe('sandbox.exec')
    const missing = parse({ network: false })
    expect(Either.isLeft(missing) && missing.left.field).toBe('sandbox.exec')
  })
})
