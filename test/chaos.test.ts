import { readFileSync } from 'node:fs'
import * as path from 'node:path'
import { startMockLlm } from '@agentvisor/cli'
import { listApprovals, listTransitions, openStore } from '@agentvisor/store'
import { describe, expect, it } from 'vitest'
import { type CliResult, lastJson, runCli, tempDir, writeTask } from './support/cli.js'
import { killMatching } from './support/processes.js'
import { runCall } from './support/run-call.js'

/** A small seeded PRNG (mulberry32), so a failing seed can be replayed. */
const prng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const MARK = 'chaos-effect'
const effect = (line: string, extra = '') => ({ name: 'exec', arguments: { command: `echo ${line} >> effects.log${extra} # ${MARK}` } })
const write = (p: string, content: string) => ({ name: 'write_file', arguments: { path: p, content } })

// Every step's answer depends only on the turn (replay: turn), so a dispatch lost to a kill
// gets the same answer when it is sent again.
const STEPS = [
  { delayMs: 120, toolCalls: [effect('a'), write('notes/one.txt', 'one')] },
  { delayMs: 80, toolCalls: [effect('b', '; sleep 0.3')] },
  { delayMs: 150, toolCalls: [write('notes/two.txt', 'two'), effect('c')] },
  { delayMs: 60, toolCalls: [write('out.txt', 'DONE')] }
]

describe('chaos: SIGKILL at random moments, resume, again and again', () => {
  it('always ends with the same workspace, each effect once, and a contiguous transition sequence', async () => {
    let kills = 0
    const seeds: number[] = []
    for (let seed = 1; kills < 20 && seed <= 30; seed++) {
      seeds.push(seed)
      console.log(`chaos seed ${seed}`)
      const random = prng(seed)
      const mock = await startMockLlm({ scenarios: { models: { m: STEPS }, replay: 'turn' } as never, port: 0 })
      try {
        const dir = tempDir()
        const db = path.join(dir, 'av.db')
        const ws = path.join(dir, 'ws')
        const file = writeTask(dir, {
          goal: 'Do the chaos steps',
          workspace: 'ws',
          providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
          verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
          approval: 'auto'
        })
        let runId: string | undefined
        let finished: CliResult | undefined
        // Up to this many kills per seed, then the run is let finish.
        let killsLeft = 6
        for (let round = 0; finished === undefined && round < 60; round++) {
          let pid = 0
          let exited = false
          const args = runId === undefined ? ['run', file, '--json', '--db', db] : ['resume', runId, '--json', '--db', db]
          const child = runCli(args, { onSpawn: (p) => (pid = p), onStderr: (t) => (runId ??= /run (\S+) started/.exec(t)?.[1]) })
          void child.then(() => (exited = true))
          const killAfter = 300 + Math.floor(random() * 1800)
          const outcome = killsLeft > 0 ? await Promise.race([child, new Promise<undefined>((r) => setTimeout(() => r(undefined), killAfter))]) : await child
          if (outcome === undefined && !exited) {
            process.kill(pid, 'SIGKILL')
            kills += 1
            killsLeft -= 1
            await child
            // A killed driver's exec may still be running in its own process group: stop it.
            killMatching(MARK)
            // Killed before the run existed (runId unknown): the next round starts it again.
            continue
          }
          const result = outcome ?? (await child)
          if (result.code === 0) {
            finished = result
          } else if (result.code === 3) {
            // An exec was interrupted after it started: settle it like an operator who looks.
            const store = await openStore(db)
            try {
              const log = readFileSync(path.join(ws, 'effects.log'), { encoding: 'utf8', flag: 'a+' })
              for (const request of (await runCall(listApprovals(store.db, runId!))).filter((r) => r.status === 'pending' && r.kind === 'recovery')) {
                const line = /echo (\w)/.exec(request.target)![1]!
                const decision = log.split('\n').includes(line) ? ['--completed', `${line} is in effects.log`] : ['--retry']
                const approve = await runCli(['approve', runId!, request.id, ...decision, '--db', db])
                expect(approve.code, approve.stderr).toBe(0)
              }
            } finally {
              await store.close()
            }
          } else {
            throw new Error(`seed ${seed}: ${args[0]} exited ${result.code}: ${result.stderr}`)
          }
        }
        expect(finished, `seed ${seed} did not finish`).toBeDefined()
        expect(lastJson(finished!)).toMatchObject({ runId, status: 'succeeded' })
        expect(readFileSync(path.join(ws, 'effects.log'), 'utf8')).toBe('a\nb\nc\n')
        expect(readFileSync(path.join(ws, 'notes', 'one.txt'), 'utf8')).toBe('one')
        expect(readFileSync(path.join(ws, 'notes', 'two.txt'), 'utf8')).toBe('two')
        expect(readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('DONE')
        const store = await openStore(db)
        try {
          const seqs = (await runCall(listTransitions(store.db, runId!))).map((t) => t.seq)
          expect(seqs).toEqual(seqs.map((_, i) => i + 1))
        } finally {
          await store.close()
        }
      } finally {
        await mock.close()
      }
    }
    console.log(`chaos: ${kills} kills over seeds ${seeds.join(', ')}`)
    expect(kills).toBeGreaterThanOrEqual(20)
  }, 600_000)
})
