import { spawn } from 'node:child_process'
import { lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Agentvisor, type ToolResultRecord } from '@agentvisor/actors'
import { listPolicyEvents, listSteps, openStore } from '@agentvisor/store'
import { describe, expect, it } from 'vitest'
import { tempDir } from './support/cli.js'
import { runCall } from './support/run-call.js'

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

// A run takes well under a second; under a loaded machine (the whole suite beside other jobs) all
// 5 runs once met the folder on every call (2026-12-02), so up to 20 are played: the loop ends at
// the first refusal, and only an unlucky scheduler pays for more.
const MAX_RUNS = 20

/** A written file's name in one run: each run writes files of its own. */
const fileName = (round: number, step: number, i: number) => `r${round}-s${step}-${i}.txt`

/** One run's script: each step writes and reads through `link`, half and half. */
const roundSteps = (round: number) =>
  Array.from({ length: STEPS }, (_, step) => ({
    toolCalls: Array.from({ length: CALLS_PER_STEP }, (_, i) =>
      i % 2 === 0
        ? { name: 'write_file', arguments: { path: `link/${fileName(round, step, i)}`, content: `payload-${round}-${step}-${i}` } }
        : { name: 'read_file', arguments: { path: 'link/secret.txt' } }
    )
  }))

/**
 * Checks one run's stored results: every call acted inside, failed, or was refused, never outside,
 * and every refusal is in the audit trail as a sandbox refusal. Returns how many were refused.
 */
const checkRun = async (db: string, runId: string, round: number, ws: string): Promise<number> => {
  const inside = filesBelow(ws)
  const store = await openStore(db)
  try {
    const rows = await runCall(listSteps(store.db, runId))
    const results = rows.slice(0, STEPS).flatMap((row): ReadonlyArray<ToolResultRecord> => row.results ?? [])
    expect(results).toHaveLength(STEPS * CALLS_PER_STEP)
    let refused = 0
    for (const [index, result] of results.entries()) {
      const step = Math.floor(index / CALLS_PER_STEP)
      const i = index % CALLS_PER_STEP
      const requested = result.name === 'write_file' ? `link/${fileName(round, step, i)}` : 'link/secret.txt'
      expect(result.output).not.toContain(OUTSIDE)
      if (result.output === `Path escapes the workspace boundary: ${requested}`) {
        refused += 1
      } else if (result.ok && result.name === 'write_file') {
        // The file is inside, in whichever folder `link` was when it was written.
        const written = inside.filter((file) => path.basename(file) === fileName(round, step, i))
        expect(written).toHaveLength(1)
        expect(readFileSync(written[0]!, 'utf8')).toBe(`payload-${round}-${step}-${i}`)
      } else if (result.ok) {
        expect(result.output).toBe(INSIDE)
      } else {
        // `link` was between two states: nothing there, so nothing was read or written.
        expect(result.output).toMatch(/^(No such file: link\/secret\.txt|Cannot write link\/r\d+-s\d+-\d+\.txt: .+)$/)
      }
    }
    const refusals = (await runCall(listPolicyEvents(store.db, runId))).filter((event) => event.kind === 'refusal')
    expect(refusals).toHaveLength(refused)
    for (const event of refusals) expect(`${event.rule}/${event.layer}`).toBe('workspace/sandbox')
    return refused
  } finally {
    await store.close()
  }
}

/** Starts the swapper flipping `<ws>/link` between the folder inside and `outside`; resolves once it is flipping. */
const startSwapper = async (ws: string, outside: string) => {
  const swapper = spawn(process.execPath, [SWAPPER, 'folder', ws, outside, '50000000', '60000'], {
    stdio: ['ignore', 'pipe', 'inherit']
  })
  let output = ''
  const exited = new Promise<void>((resolve) => swapper.once('exit', () => resolve()))
  await new Promise<void>((resolve, reject) => {
    swapper.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString()
      if (output.includes('"ready"')) resolve()
    })
    void exited.then(() => reject(new Error(`swapper exited before it was ready: ${output}`)))
  })
  return {
    /** Stops it and returns what it printed. */
    stop: async () => {
      swapper.kill('SIGTERM')
      await exited
      return output
    }
  }
}

describe('a run whose workspace folder is swapped for a symlink to outside while it works', () => {
  it('writes and reads only inside, and records each refused call as a sandbox refusal', async () => {
    const dir = tempDir()
    const outside = path.join(dir, 'outside')
    mkdirSync(outside)
    writeFileSync(path.join(outside, 'secret.txt'), OUTSIDE)
    const db = path.join(dir, 'av.db')
    const av = await Agentvisor.open({ db })
    // Which side of the swap each call meets is up to the scheduler: a run whose calls all met the
    // folder proves nothing about refusals, so runs are played (each in a workspace of its own, the
    // swapper stopped before its files are checked) until a call was refused, at most MAX_RUNS.
    let refused = 0
    try {
      for (let round = 0; round < MAX_RUNS && refused === 0; round += 1) {
        const ws = path.join(dir, `ws-${round}`)
        mkdirSync(path.join(ws, 'link'), { recursive: true })
        writeFileSync(path.join(ws, 'link', 'secret.txt'), INSIDE)
        const swapper = await startSwapper(ws, outside)
        let result: Awaited<ReturnType<typeof av.run>>
        try {
          result = await av.run({
            goal: 'write notes through link',
            workspace: ws,
            approval: 'auto',
            limits: { maxSteps: STEPS + 1 },
            providers: [{ name: 'p', kind: 'scripted', steps: [...roundSteps(round), { text: 'done' }] }]
          })
        } finally {
          expect(await swapper.stop()).not.toMatch(/"done"|"error"/)
        }
        expect(result.status).toBe('succeeded')
        expect(filesBelow(ws).filter((file) => path.basename(file).startsWith('.agentvisor-'))).toEqual([])
        refused += await checkRun(db, result.runId, round, ws)
      }
    } finally {
      await av.close()
    }
    expect(refused).toBeGreaterThan(0)
    expect(readdirSync(outside)).toEqual(['secret.txt'])
    expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe(OUTSIDE)
  })
})
