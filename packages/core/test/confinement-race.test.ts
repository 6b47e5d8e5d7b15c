import { spawn, type ChildProcess } from 'node:child_process'
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync
} from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Effect } from 'effect'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { openWorkspace, runTool, verify, workspaceEscape, type ToolOutcome, type Workspace } from '@agentvisor/core'
import { listPinned, readPinned, writePinned, type PinOptions, type PinTarget } from '../src/tools/pinned-fs.js'

const INSIDE = 'inside-content'
const OUTSIDE = 'OUTSIDE-SECRET-77'
const SWAPPER = fileURLToPath(new URL('./support/symlink-swapper.mjs', import.meta.url))
/** How many calls of each tool race the swapper. */
const CALLS = 300

let base: string
let outside: string
let ws: Workspace

beforeEach(async () => {
  base = realpathSync(mkdtempSync(path.join(tmpdir(), 'agentvisor-race-')))
  outside = path.join(base, 'outside')
  mkdirSync(outside)
  writeFileSync(path.join(outside, 'secret.txt'), OUTSIDE)
  writeFileSync(path.join(outside, 'outside-only.txt'), OUTSIDE)
  ws = await Effect.runPromise(openWorkspace(path.join(base, 'ws')))
})

afterEach(() => rmSync(base, { recursive: true, force: true }))

const call = (name: string, args: unknown): Promise<ToolOutcome> => Effect.runPromise(runTool(ws, { name, arguments: JSON.stringify(args) }))

const refusal = (requested: string): ToolOutcome => ({
  ok: false,
  output: `Path escapes the workspace boundary: ${requested}`,
  refusal: { rule: 'workspace', layer: 'sandbox' }
})

/** Every file below `dir`, symlinks listed but never followed. */
const filesBelow = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name)
    return lstatSync(full).isDirectory() ? filesBelow(full) : [full]
  })

interface Swapper {
  /** Whether it is still swapping (it neither finished its bound nor failed). */
  readonly running: () => boolean
  readonly output: () => string
  readonly stop: () => Promise<void>
}

/** Starts the swapper process and waits until it has made its first full cycle. */
const startSwapper = async (mode: 'folder' | 'file', target: string, text = '', dwellUs = 0): Promise<Swapper> => {
  const args = [mode, ws.root, target, '50000000', '60000', text, String(dwellUs)]
  const child: ChildProcess = spawn(process.execPath, [SWAPPER, ...args], {
    stdio: ['ignore', 'pipe', 'inherit']
  })
  let output = ''
  let exited = false
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true
      resolve()
    })
  )
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString()
      if (output.includes('"ready"')) resolve()
    })
    void exit.then(() => reject(new Error(`swapper exited before it was ready: ${output}`)))
  })
  return {
    running: () => !exited && !output.includes('"done"') && !output.includes('"error"'),
    output: () => output,
    stop: async () => {
      if (!exited) child.kill('SIGTERM')
      await exit
    }
  }
}

/** Runs the calls a few at a time, as a model's parallel tool calls and a busy host would. */
const race = (calls: ReadonlyArray<() => Promise<ToolOutcome>>): Promise<ToolOutcome[]> =>
  Effect.runPromise(Effect.forEach(calls, (run) => Effect.promise(run), { concurrency: 8 }))

/**
 * How many rounds of calls at most, until both sides of the swap were seen (a loaded host may
 * need more than one). A round of file checks lasts a few milliseconds (they answer at once),
 * short enough to fit whole in one time slice where the swapper is not scheduled: the bound is
 * high so that the rounds together span the swapper's working too. Every round's results are
 * checked, so more rounds only test more.
 */
const MAX_ROUNDS = 40
/**
 * The folder race's time limit: its rounds are bounded by MAX_ROUNDS, not by the clock. A round of
 * 900 file calls takes ~0.1 s alone and over a second on a host busy with the rest of the suite
 * (measured: 40 rounds, ~60 s, once), where the default 30 s cut the test off mid-race.
 */
const RACE_TIMEOUT_MS = 180_000

/**
 * Plays `round` (given its index) until `live` says both sides of the swap were met (so the calls
 * really raced it), at most MAX_ROUNDS times; returns every round's results, each to be checked.
 */
const raceUntil = async <A>(round: (index: number) => Promise<A[]>, live: (all: A[]) => boolean): Promise<A[][]> => {
  const rounds: A[][] = []
  while (rounds.length < MAX_ROUNDS && !live(rounds.flat())) rounds.push(await round(rounds.length))
  return rounds
}

/** Whether some calls acted and some were refused: both states of the swap were met. */
const bothSides = (outcomes: ToolOutcome[]): boolean => outcomes.some((o) => o.ok) && outcomes.some((o) => o.refusal !== undefined)

/** A write's file in one round of the folder race: each round writes files of its own. */
const written = (round: number, i: number) => ({ name: `w-${round}-${i}.txt`, payload: `payload-${round}-${i}` })

/** One round of the folder race: every call acted inside, failed, or was refused; none outside. */
const checkFolderRound = (all: ToolOutcome[], inside: string[], round: number): void => {
  const outcomes = {
    writes: all.filter((_, i) => i % 3 === 0),
    reads: all.filter((_, i) => i % 3 === 1),
    lists: all.filter((_, i) => i % 3 === 2)
  }
  outcomes.writes.forEach((outcome, i) => {
    const { name, payload } = written(round, i)
    const requested = `link/${name}`
    if (outcome.ok) {
      expect(outcome.output).toBe(`Wrote ${payload.length} bytes to ${requested}`)
      const files = inside.filter((file) => path.basename(file) === name)
      expect(files).toHaveLength(1)
      expect(readFileSync(files[0]!, 'utf8')).toBe(payload)
    } else if (outcome.refusal === undefined) {
      // A folder the swapper removed under a write: it failed and acted nowhere.
      expect(outcome.output.startsWith(`Cannot write ${requested}: `), outcome.output).toBe(true)
    } else {
      expect(outcome).toEqual(refusal(requested))
    }
  })
  for (const outcome of outcomes.reads) {
    expect(outcome.output).not.toContain(OUTSIDE)
    if (outcome.ok) expect(outcome.output).toBe(INSIDE)
    else if (outcome.refusal === undefined) expect(outcome.output).toBe('No such file: link/secret.txt')
    else expect(outcome).toEqual(refusal('link/secret.txt'))
  }
  for (const outcome of outcomes.lists) {
    expect(outcome.output).not.toContain('outside-only.txt')
    if (!outcome.ok && outcome.refusal !== undefined) expect(outcome).toEqual(refusal('link'))
  }
}

describe('file tools racing a symlink swap', () => {
  it(
    `never write or read outside while ${CALLS} writes, reads and listings go through a folder flipped between inside and a symlink to outside`,
    async () => {
      mkdirSync(path.join(ws.root, 'link'))
      writeFileSync(path.join(ws.root, 'link', 'secret.txt'), INSIDE)
      const swapper = await startSwapper('folder', outside)
      let rounds: ToolOutcome[][]
      try {
        const calls = (round: number) =>
          Array.from({ length: CALLS }, (_, i) => [
            () => call('write_file', { path: `link/${written(round, i).name}`, content: written(round, i).payload }),
            () => call('read_file', { path: 'link/secret.txt' }),
            () => call('list_dir', { path: 'link' })
          ]).flat()
        rounds = await raceUntil(
          (round) => race(calls(round)),
          (all) => [0, 1].every((kind) => bothSides(all.filter((_, i) => i % 3 === kind)))
        )
        // The race was live for every call, not over before they started.
        expect(swapper.running(), swapper.output()).toBe(true)
      } finally {
        await swapper.stop()
      }

      expect(readdirSync(outside).sort()).toEqual(['outside-only.txt', 'secret.txt'])
      expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe(OUTSIDE)

      const inside = filesBelow(ws.root)
      expect(inside.filter((file) => path.basename(file).startsWith('.agentvisor-'))).toEqual([])
      // Both sides of the swap were seen, so the calls really raced it.
      expect([0, 1].map((kind) => bothSides(rounds.flat().filter((_, i) => i % 3 === kind)))).toEqual([true, true])
      for (const [round, all] of rounds.entries()) checkFolderRound(all, inside, round)
    },
    RACE_TIMEOUT_MS
  )

  it(`never return outside content nor change the outside file while ${CALLS} reads and writes go through a file flipped with a symlink to it`, async () => {
    const target = path.join(outside, 'secret.txt')
    writeFileSync(path.join(ws.root, 'link'), INSIDE)
    // Each state held 100 µs: a swap at full speed leaves the file there too briefly for a read
    // to ever be both checked and opened while it is, and this test wants to see both outcomes.
    const swapper = await startSwapper('file', target, INSIDE, 100)
    let all: ToolOutcome[]
    try {
      const calls = Array.from({ length: CALLS }, (_, i) => [
        () => call('read_file', { path: 'link' }),
        () => call('write_file', { path: 'link', content: `payload-${i}` })
      ]).flat()
      all = (
        await raceUntil(
          () => race(calls),
          (done) => bothSides(done.filter((_, i) => i % 2 === 0))
        )
      ).flat()
      expect(swapper.running(), swapper.output()).toBe(true)
    } finally {
      await swapper.stop()
    }
    expect(readFileSync(target, 'utf8')).toBe(OUTSIDE)
    expect(readdirSync(outside).sort()).toEqual(['outside-only.txt', 'secret.txt'])
    expect(filesBelow(ws.root).filter((file) => path.basename(file).startsWith('.agentvisor-'))).toEqual([])
    const reads = all.filter((_, i) => i % 2 === 0)
    for (const outcome of reads) {
      expect(outcome.output).not.toContain(OUTSIDE)
      if (outcome.ok) expect(outcome.output).toMatch(/^(inside-content|payload-\d+)$/)
      else expect(outcome).toEqual(refusal('link'))
    }
    expect(bothSides(reads)).toBe(true)
  })

  it(`never let ${CALLS} verify checks pass on outside content while the folder they read is flipped with a symlink to outside`, async () => {
    mkdirSync(path.join(ws.root, 'link'))
    writeFileSync(path.join(ws.root, 'link', 'secret.txt'), INSIDE)
    const swapper = await startSwapper('folder', outside)
    let results: Array<{ passed: boolean; detail: string }>
    try {
      const spec = { fileContains: { path: 'link/secret.txt', text: OUTSIDE } }
      const seenBoth = (done: Array<{ detail: string }>) => {
        const details = new Set(done.map((result) => result.detail))
        return details.has(`link/secret.txt does not contain ${JSON.stringify(OUTSIDE)}`) && details.has('Path escapes the workspace boundary: link/secret.txt')
      }
      const round = () => Effect.runPromise(Effect.forEach(Array.from({ length: CALLS }), () => verify(ws, spec), { concurrency: 8 }))
      results = (await raceUntil(round, seenBoth)).flat()
      expect(swapper.running(), swapper.output()).toBe(true)
    } finally {
      await swapper.stop()
    }
    const details = new Set(results.map((result) => result.detail))
    expect(results.filter((result) => result.passed)).toEqual([])
    // Read inside, refused, or caught between two states; never the outside file.
    expect(details.has(`link/secret.txt does not contain ${JSON.stringify(OUTSIDE)}`)).toBe(true)
    expect(details.has('Path escapes the workspace boundary: link/secret.txt')).toBe(true)
  })

  it('closes every descriptor it opens, whether the call succeeds, fails or is refused', async () => {
    mkdirSync(path.join(ws.root, 'in', 'deep'), { recursive: true })
    writeFileSync(path.join(ws.root, 'in', 'deep', 'a.txt'), INSIDE)
    writeFileSync(path.join(ws.root, 'in', 'file'), INSIDE)
    symlinkSync(outside, path.join(ws.root, 'link'))
    const calls: Array<[string, unknown]> = [
      ['read_file', { path: 'in/deep/a.txt' }],
      ['read_file', { path: 'in/deep/missing.txt' }],
      ['read_file', { path: 'in/file/below.txt' }],
      ['read_file', { path: 'in' }],
      ['write_file', { path: 'in/deep/new/b.txt', content: 'x' }],
      ['write_file', { path: 'in/file/below.txt', content: 'x' }],
      ['write_file', { path: 'in/deep', content: 'x' }],
      ['list_dir', { path: 'in/deep' }],
      ['list_dir', { path: 'in/file' }]
    ]
    const openFds = () => readdirSync('/proc/self/fd').length
    await call('list_dir', { path: '.' })
    const before = openFds()
    for (let round = 0; round < 20; round += 1) {
      for (const [name, args] of calls) await call(name, args)
    }
    expect(openFds()).toBe(before)
    // The same calls through handles checked after opening, as where /proc is missing.
    const fallback = (requested: string): PinTarget => ({
      root: ws.root,
      refuse: () => workspaceEscape(requested),
      options: { fdLinks: '/nonexistent-fd-links' }
    })
    for (let round = 0; round < 20; round += 1) {
      await readPinned(fallback('in/deep/a.txt'), path.join(ws.root, 'in', 'deep', 'a.txt'), 10)
      await readPinned(fallback('link/secret.txt'), path.join(ws.root, 'link', 'secret.txt'), 10).catch(() => undefined)
      await writePinned(fallback('in/file/x'), path.join(ws.root, 'in', 'file', 'x'), 'x').catch(() => undefined)
      await listPinned(fallback('in'), path.join(ws.root, 'in'), 10)
    }
    expect(openFds()).toBe(before)
  })

  it('still writes through a symlink that stays inside, to a folder and to a file', async () => {
    mkdirSync(path.join(ws.root, 'real'))
    writeFileSync(path.join(ws.root, 'real', 'data.txt'), 'old')
    symlinkSync(path.join(ws.root, 'real'), path.join(ws.root, 'alias'))
    symlinkSync('real/data.txt', path.join(ws.root, 'data-link.txt'))
    expect((await call('write_file', { path: 'alias/sub/new.txt', content: 'via folder link' })).ok).toBe(true)
    expect(readFileSync(path.join(ws.root, 'real', 'sub', 'new.txt'), 'utf8')).toBe('via folder link')
    expect((await call('write_file', { path: 'data-link.txt', content: 'via file link' })).ok).toBe(true)
    expect(readFileSync(path.join(ws.root, 'real', 'data.txt'), 'utf8')).toBe('via file link')
    expect(lstatSync(path.join(ws.root, 'data-link.txt')).isSymbolicLink()).toBe(true)
    expect(await call('read_file', { path: 'alias/sub/new.txt' })).toEqual({ ok: true, output: 'via folder link' })
    expect(await call('list_dir', { path: 'alias' })).toEqual({ ok: true, output: 'data.txt\nsub/' })
  })
})

/**
 * The moment after the check, frozen: each call gets the real path `resolveInside` approved
 * while `link` was still a real folder inside, and acts after it became a symlink to outside.
 */
describe.each([
  ['through /proc/self/fd', {}],
  // Not Linux: no fd links, so each opened handle is checked against the path afterwards.
  ['with the post-open check where /proc is missing', { fdLinks: '/nonexistent-fd-links' }]
] satisfies ReadonlyArray<[string, PinOptions]>)('acting on a checked path swapped afterwards, %s', (_, options) => {
  const target = (requested: string): PinTarget => ({ root: ws.root, refuse: () => workspaceEscape(requested), options })
  const refused = async (action: Promise<unknown>, requested: string) => {
    await expect(action).rejects.toMatchObject({ _tag: 'WorkspaceEscapeError', message: `Path escapes the workspace boundary: ${requested}` })
  }

  beforeEach(() => {
    symlinkSync(outside, path.join(ws.root, 'link'))
    mkdirSync(path.join(ws.root, 'in'))
  })

  it('refuses to read a file through a folder swapped for a symlink', async () => {
    await refused(readPinned(target('link/secret.txt'), path.join(ws.root, 'link', 'secret.txt'), 100), 'link/secret.txt')
  })

  it('refuses to read a file swapped for a symlink to an outside file', async () => {
    symlinkSync(path.join(outside, 'secret.txt'), path.join(ws.root, 'in', 'doc.txt'))
    await refused(readPinned(target('in/doc.txt'), path.join(ws.root, 'in', 'doc.txt'), 100), 'in/doc.txt')
  })

  it('refuses to list a folder swapped for a symlink', async () => {
    await refused(listPinned(target('link'), path.join(ws.root, 'link'), 10), 'link')
  })

  it('refuses to write through a folder swapped for a symlink and creates nothing outside', async () => {
    await refused(writePinned(target('link/new.txt'), path.join(ws.root, 'link', 'new.txt'), 'x'), 'link/new.txt')
    await refused(writePinned(target('link/a/b.txt'), path.join(ws.root, 'link', 'a', 'b.txt'), 'x'), 'link/a/b.txt')
    expect(readdirSync(outside).sort()).toEqual(['outside-only.txt', 'secret.txt'])
  })

  it('refuses to write over a file swapped for a symlink and leaves the outside file as it was', async () => {
    symlinkSync(path.join(outside, 'secret.txt'), path.join(ws.root, 'in', 'doc.txt'))
    await refused(writePinned(target('in/doc.txt'), path.join(ws.root, 'in', 'doc.txt'), 'pwned'), 'in/doc.txt')
    expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe(OUTSIDE)
    expect(readdirSync(path.join(ws.root, 'in'))).toEqual(['doc.txt'])
  })

  it('reads, lists and writes (creating folders, keeping the mode) when nothing was swapped', async () => {
    await writePinned(target('in/a/b/c.txt'), path.join(ws.root, 'in', 'a', 'b', 'c.txt'), 'made')
    expect(readFileSync(path.join(ws.root, 'in', 'a', 'b', 'c.txt'), 'utf8')).toBe('made')
    expect(await readPinned(target('in/a/b/c.txt'), path.join(ws.root, 'in', 'a', 'b', 'c.txt'), 2)).toEqual({
      kind: 'file',
      head: Buffer.from('ma'),
      size: 4
    })
    expect(await listPinned(target('in'), path.join(ws.root, 'in'), 10)).toEqual({
      shown: [{ name: 'a', isFolder: true }],
      total: 1
    })
    chmodSync(path.join(ws.root, 'in', 'a', 'b', 'c.txt'), 0o750)
    await writePinned(target('in/a/b/c.txt'), path.join(ws.root, 'in', 'a', 'b', 'c.txt'), 'again')
    expect(readFileSync(path.join(ws.root, 'in', 'a', 'b', 'c.txt'), 'utf8')).toBe('again')
    expect(statSync(path.join(ws.root, 'in', 'a', 'b', 'c.txt')).mode & 0o777).toBe(0o750)
    expect(readdirSync(path.join(ws.root, 'in', 'a', 'b'))).toEqual(['c.txt'])
    expect(existsSync(path.join(outside, 'a'))).toBe(false)
  })
})
