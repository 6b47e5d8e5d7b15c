import { spawn } from 'node:child_process'
import * as path from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { BIN, waitFor } from './support/cli.js'
import { descendants, isGone, killAll } from './support/processes.js'

const PARENT = path.join(import.meta.dirname, 'fixtures', 'tethered-parent.mjs')
const SCENARIOS = path.join(import.meta.dirname, '..', 'examples', 'single-agent', 'scenarios.json')

describe('spawnTethered (docs/cli.md, "Ending with the parent")', () => {
  it('ends an agentvisor child and a whole foreign process group when the parent is SIGKILLed', async () => {
    const parent = spawn(process.execPath, [PARENT, BIN, SCENARIOS], { stdio: ['ignore', 'pipe', 'inherit'] })
    let stdout = ''
    parent.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    let started: ReturnType<typeof descendants> = []
    onTestFinished(() => killAll([parent.pid!, ...started.map((p) => p.pid)]))
    await waitFor(() => (stdout.includes('ready') ? true : undefined), 'the parent to start its children')
    // Both sleeps run once the shell has forked them.
    started = await waitFor(() => {
      const found = descendants(parent.pid!)
      return found.filter((p) => p.command === 'sleep 300').length === 2 ? found : undefined
    }, 'the shell to start its sleeps')
    expect(started.filter((p) => / mock-llm --scenarios /.test(p.command))).toHaveLength(1)
    expect(started.filter((p) => /tether-watchdog\.js .* sh -c/.test(p.command))).toHaveLength(1)
    parent.kill('SIGKILL')
    await waitFor(() => (started.every((p) => isGone(p.pid)) ? true : undefined), 'every child of the parent to end', 30_000).catch(() => {
      throw new Error(
        `still running: ${started
          .filter((p) => !isGone(p.pid))
          .map((p) => `${p.pid} ${p.command}`)
          .join('; ')}`
      )
    })
  }, 60_000)

  it('refuses an AGENTVISOR_EXIT_WITH_PARENT that is not an open descriptor, with one line and exit 2', async () => {
    for (const [value, message] of [
      ['soon', /^agentvisor: AGENTVISOR_EXIT_WITH_PARENT must be the number of an open file descriptor above 2 \(got "soon"\)$/],
      ['1', /^agentvisor: AGENTVISOR_EXIT_WITH_PARENT must be the number of an open file descriptor above 2 \(got "1"\)$/],
      ['97', /^agentvisor: AGENTVISOR_EXIT_WITH_PARENT=97: not a pipe or socket this process has open \(.+\)$/]
    ] as const) {
      const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [BIN, 'runs'], {
          env: { ...process.env, AGENTVISOR_EXIT_WITH_PARENT: value },
          stdio: ['ignore', 'ignore', 'pipe']
        })
        let stderr = ''
        child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
        child.once('close', (code) => resolve({ code, stderr }))
      })
      expect(result.code, value).toBe(2)
      expect(result.stderr.trim().split('\n'), value).toHaveLength(1)
      expect(result.stderr.trim(), value).toMatch(message)
    }
  })
})
