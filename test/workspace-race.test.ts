import { spawn } from 'node:child_process'
import { lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Agentvisor, type ToolResultRecord } from '@agentvisor/actors'
import { listPolicyEvents, listSteps, openStore } from '@agentvisor/store'
import { describe, expect, it } from 'vitest'
import { tempDir } from './support/cli.js'

const SWAPPER = fileURLToPath(new URL('../packages/core/test/support/symlink-swapper.mjs', import.meta.url))
const OUTSIDE = 'OUTSIDE-SECRET-91'
const INSIDE = 'inside-content'
const STEPS = 3
const CALLS_PER_STEP = 40

/** Every file below `dir`, symlinks listed but never followed. */
const filesBelow = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name)
    return lstatSync(full).isDirectory() ? filesBelow(full) : [full]
  })

describe('a run whose workspace folder is swapped for a symlink to outside while it works', () => {
  it('writes and reads only inside, and records each refused call as a sandbox refusal', async () => {
    const dir = tempDir()
    const ws = path.join(dir, 'ws')
    const outside = path.join(dir, 'outside')
    mkdirSync(path.join(ws, 'link'), { recursive: true })
    mkdirSync(outside)
    writeFileSync(path.join(outside, 'secret.txt'), OUTSIDE)
    writeFileSync(path.join(ws, 'link', 'secret.txt'), INSIDE)
    const steps = Array.from({ length: STEPS }, (_, step) => ({
      toolCalls: Array.from({ length: CALLS_PER_STEP }, (_, i) =>
        i % 2 === 0
          ? { name: 'write_file', arguments: { path: `link/s${step}-${i}.txt`, content: `payload-${step}-${i}` } }
          : { name: 'read_file', arguments: { path: 'link/secret.txt' } }
      )
    }))
    const swapper = spawn(process.execPath, [SWAPPER, 'folder', ws, outside, '50000000', '60000'], {
      stdio: ['ignore', 'pipe', 'inherit']
    })
    let swapperOutput = ''
    const exited = new Promise<void>((resolve) => swapper.once('exit', () => resolve()))
    await new Promise<void>((resolve, reject) => {
      swapper.stdout.on('data', (chunk: Buffer) => {
        swapperOutput += chunk.toString()
        if (swapperOutput.includes('"ready"')) resolve()
      })
      void exited.then(() => reject(new Error(`swapper exited before it was ready: ${swapperOutput}`)))
    })
    const db = path.join(dir, 'av.db')
    const av = await Agentvisor.open({ db })
    let runId: string
    try {
      const result = await av.run({
        goal: 'write notes through link',
        workspace: ws,
        approval: 'auto',
        limits: { maxSteps: STEPS + 1 },
        providers: [{ name: 'p', kind: 'scripted', steps: [...steps, { text: 'done' }] }]
      })
      expect(result.status).toBe('succeeded')
      runId = result.runId
      expect(swapperOutput).not.toMatch(/"done"|"error"/)
    } finally {
      await av.close()
      swapper.kill('SIGTERM')
      await exited
    }

    expect(readdirSync(outside)).toEqual(['secret.txt'])
    expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe(OUTSIDE)
    const inside = filesBelow(ws)
    expect(inside.filter((file) => path.basename(file).startsWith('.agentvisor-'))).toEqual([])

    const store = await openStore(db)
    try {
      const rows = await listSteps(store.db, runId)
      const results = rows.slice(0, STEPS).flatMap((row): ReadonlyArray<ToolResultRecord> => row.results ?? [])
      expect(results).toHaveLength(STEPS * CALLS_PER_STEP)
      let refused = 0
      for (const [index, result] of results.entries()) {
        const step = Math.floor(index / CALLS_PER_STEP)
        const i = index % CALLS_PER_STEP
        const requested = result.name === 'write_file' ? `link/s${step}-${i}.txt` : 'link/secret.txt'
        expect(result.output).not.toContain(OUTSIDE)
        if (result.output === `Path escapes the workspace boundary: ${requested}`) {
          refused += 1
        } else if (result.ok && result.name === 'write_file') {
          // The file is inside, in whichever folder `link` was when it was written.
          const written = inside.filter((file) => path.basename(file) === `s${step}-${i}.txt`)
          expect(written).toHaveLength(1)
          expect(readFileSync(written[0]!, 'utf8')).toBe(`payload-${step}-${i}`)
        } else if (result.ok) {
          expect(result.output).toBe(INSIDE)
        } else {
          // `link` was between two states: nothing there, so nothing was read or written.
          expect(result.output).toMatch(/^(No such file: link\/secret\.txt|Cannot write link\/s\d+-\d+\.txt: .+)$/)
        }
      }
      // Which side of the swap each call met is up to the scheduler; packages/core's race tests
      // play rounds until both were met. Here every refusal must be in the audit trail.
      const refusals = (await listPolicyEvents(store.db, runId)).filter((event) => event.kind === 'refusal')
      expect(refusals).toHaveLength(refused)
      expect(new Set(refusals.map((event) => `${event.rule}/${event.layer}`))).toEqual(new Set(['workspace/sandbox']))
    } finally {
      await store.close()
    }
  })
})
