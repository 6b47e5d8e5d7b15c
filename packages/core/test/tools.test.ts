import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { Effect, Fiber } from 'effect'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { openWorkspace, processGroupAlive, runTool, WORKSPACE_TOOLS, type Workspace } from '@agentvisor/core'

const SECRET = 'TOP-SECRET-CONTENT-42'

let base: string
let outside: string
let ws: Workspace

beforeEach(async () => {
  base = realpathSync(mkdtempSync(path.join(tmpdir(), 'agentvisor-tools-')))
  outside = path.join(base, 'outside')
  mkdirSync(outside)
  writeFileSync(path.join(outside, 'secret.txt'), SECRET)
  ws = await Effect.runPromise(openWorkspace(path.join(base, 'ws')))
})

afterEach(() => rmSync(base, { recursive: true, force: true }))

const call = (name: string, args: unknown) => Effect.runPromise(runTool(ws, { name, arguments: typeof args === 'string' ? args : JSON.stringify(args) }))

const inWs = (...parts: string[]) => path.join(ws.root, ...parts)

const expectRefused = (outcome: Awaited<ReturnType<typeof call>>, requested: string) => {
  expect(outcome).toEqual({
    ok: false,
    output: `Path escapes the workspace boundary: ${requested}`,
    refusal: { rule: 'workspace', layer: 'sandbox' }
  })
  expect(outcome.output).not.toContain(SECRET)
}

describe('tool specs', () => {
  it('offers read_file, write_file, list_dir and exec, each with an object JSON Schema and a description', () => {
    expect(WORKSPACE_TOOLS.map((tool) => tool.name)).toEqual(['read_file', 'write_file', 'list_dir', 'exec'])
    for (const tool of WORKSPACE_TOOLS) {
      expect(tool.description.length).toBeGreaterThan(20)
      expect(tool.parameters['type']).toBe('object')
    }
    expect(WORKSPACE_TOOLS.find((tool) => tool.name === 'write_file')?.parameters['required']).toEqual(['path', 'content'])
  })
})

describe('read_file', () => {
  it('returns the text of a file inside the workspace', async () => {
    writeFileSync(inWs('notes.txt'), 'hello\nworld\n')
    expect(await call('read_file', { path: 'notes.txt' })).toEqual({ ok: true, output: 'hello\nworld\n' })
  })

  it('cuts a file above 100 KiB and says so', async () => {
    writeFileSync(inWs('big.txt'), 'x'.repeat(150 * 1024))
    const outcome = await call('read_file', { path: 'big.txt' })
    expect(outcome.ok).toBe(true)
    expect(outcome.output.startsWith('x'.repeat(100 * 1024))).toBe(true)
    expect(outcome.output).not.toContain('x'.repeat(100 * 1024 + 1))
    expect(outcome.output).toContain(`truncated, showing the first ${100 * 1024} of ${150 * 1024} bytes`)
  })

  it('answers a missing file with "No such file"', async () => {
    expect(await call('read_file', { path: 'nope.txt' })).toEqual({ ok: false, output: 'No such file: nope.txt' })
  })

  it('refuses ".." and never returns the outside file', async () => {
    expectRefused(await call('read_file', { path: '../outside/secret.txt' }), '../outside/secret.txt')
  })

  it('refuses an absolute path and never returns the file', async () => {
    const target = path.join(outside, 'secret.txt')
    expectRefused(await call('read_file', { path: target }), target)
  })

  it('refuses a symlink to a file outside and never returns its content', async () => {
    symlinkSync(path.join(outside, 'secret.txt'), inWs('innocent.txt'))
    expectRefused(await call('read_file', { path: 'innocent.txt' }), 'innocent.txt')
  })

  it('refuses reading through a symlinked folder that points outside', async () => {
    symlinkSync(outside, inWs('docs'))
    expectRefused(await call('read_file', { path: 'docs/secret.txt' }), 'docs/secret.txt')
  })

  it('refuses a sibling folder that shares the root name as a prefix', async () => {
    const sibling = `${ws.root}-evil`
    mkdirSync(sibling)
    writeFileSync(path.join(sibling, 'loot.txt'), SECRET)
    expectRefused(await call('read_file', { path: '../ws-evil/loot.txt' }), '../ws-evil/loot.txt')
    symlinkSync(sibling, inWs('evil'))
    expectRefused(await call('read_file', { path: 'evil/loot.txt' }), 'evil/loot.txt')
  })

  it('follows a symlink that stays inside the workspace', async () => {
    mkdirSync(inWs('real'))
    writeFileSync(inWs('real', 'data.txt'), 'inside data')
    symlinkSync(inWs('real'), inWs('alias'))
    expect(await call('read_file', { path: 'alias/data.txt' })).toEqual({ ok: true, output: 'inside data' })
  })
})

describe('write_file', () => {
  it('creates nested parent folders and writes the exact content', async () => {
    const outcome = await call('write_file', { path: 'a/b/c/out.txt', content: 'DONE ✓' })
    expect(outcome).toEqual({ ok: true, output: `Wrote ${Buffer.byteLength('DONE ✓')} bytes to a/b/c/out.txt` })
    expect(readFileSync(inWs('a', 'b', 'c', 'out.txt'), 'utf8')).toBe('DONE ✓')
  })

  it('replaces an existing file whole, keeps its mode and leaves no temporary file behind', async () => {
    writeFileSync(inWs('run.sh'), 'echo old old old\n')
    chmodSync(inWs('run.sh'), 0o755)
    expect((await call('write_file', { path: 'run.sh', content: 'echo new\n' })).ok).toBe(true)
    expect(readFileSync(inWs('run.sh'), 'utf8')).toBe('echo new\n')
    expect(statSync(inWs('run.sh')).mode & 0o777).toBe(0o755)
    expect(readdirSync(ws.root)).toEqual(['run.sh'])
  })

  it('refuses ".." and creates nothing outside', async () => {
    expectRefused(await call('write_file', { path: '../escaped.txt', content: 'x' }), '../escaped.txt')
    expect(existsSync(path.join(base, 'escaped.txt'))).toBe(false)
  })

  it('refuses to write through a symlinked folder pointing outside and creates no outside file', async () => {
    symlinkSync(outside, inWs('out'))
    expectRefused(await call('write_file', { path: 'out/new.txt', content: 'x' }), 'out/new.txt')
    expectRefused(await call('write_file', { path: 'out/deep/new.txt', content: 'x' }), 'out/deep/new.txt')
    expect(readdirSync(outside)).toEqual(['secret.txt'])
  })

  it('refuses to overwrite an outside file through a symlink and leaves it untouched', async () => {
    symlinkSync(path.join(outside, 'secret.txt'), inWs('link.txt'))
    expectRefused(await call('write_file', { path: 'link.txt', content: 'pwned' }), 'link.txt')
    expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe(SECRET)
  })

  it('refuses a dangling symlink to a missing outside file and does not create that file', async () => {
    symlinkSync(path.join(outside, 'planted.txt'), inWs('planted.txt'))
    expectRefused(await call('write_file', { path: 'planted.txt', content: 'x' }), 'planted.txt')
    expect(existsSync(path.join(outside, 'planted.txt'))).toBe(false)
  })

  it('writes through a symlinked folder that stays inside', async () => {
    mkdirSync(inWs('real'))
    symlinkSync(inWs('real'), inWs('alias'))
    expect((await call('write_file', { path: 'alias/x.txt', content: 'via alias' })).ok).toBe(true)
    expect(readFileSync(inWs('real', 'x.txt'), 'utf8')).toBe('via alias')
  })
})

describe('list_dir', () => {
  it('lists the root by default, sorted, with folders suffixed by "/"', async () => {
    writeFileSync(inWs('b.txt'), '')
    writeFileSync(inWs('a.txt'), '')
    mkdirSync(inWs('src'))
    expect(await call('list_dir', {})).toEqual({ ok: true, output: 'a.txt\nb.txt\nsrc/' })
    expect(await call('list_dir', '')).toEqual({ ok: true, output: 'a.txt\nb.txt\nsrc/' })
  })

  it('refuses listing a folder outside through a symlink and never shows its entries', async () => {
    symlinkSync(outside, inWs('out'))
    const outcome = await call('list_dir', { path: 'out' })
    expectRefused(outcome, 'out')
    expect(outcome.output).not.toContain('secret.txt')
  })

  it('answers a missing folder with "No such folder"', async () => {
    expect(await call('list_dir', { path: 'nope' })).toEqual({ ok: false, output: 'No such folder: nope' })
  })

  it('lists a folder of 3000 entries (too big to list without yielding) sorted, summarising past 1000, and keeps no fd open', async () => {
    mkdirSync(inWs('many'))
    const names = Array.from({ length: 3000 }, (_, i) => `entry-with-a-long-name-${String(i).padStart(4, '0')}.txt`)
    for (const name of names) writeFileSync(inWs('many', name), '')
    expect(statSync(inWs('many')).size).toBeGreaterThan(64 * 1024)
    const openFds = () => readdirSync('/proc/self/fd').length
    const before = openFds()
    expect(await call('list_dir', { path: 'many' })).toEqual({
      ok: true,
      output: `${names.slice(0, 1000).join('\n')}\n[list_dir: 2000 more entries not shown]`
    })
    expect(openFds()).toBe(before)
  })
})

describe('exec', () => {
  it('runs in the workspace root and reports the exit code, stdout and stderr', async () => {
    const outcome = await call('exec', { command: 'pwd; echo oops >&2; exit 4' })
    expect(outcome.ok).toBe(false)
    expect(outcome.output).toBe(`exit code: 4\nstdout:\n${ws.root}\nstderr:\noops`)
    expect((await call('exec', { command: 'echo hi > made.txt' })).ok).toBe(true)
    expect(readFileSync(inWs('made.txt'), 'utf8')).toBe('hi\n')
  })

  it('kills the whole process group when the timeout passes and says so', async () => {
    const pidFile = inWs('pid')
    const outcome = await call('exec', { command: `sleep 30 & echo $$ > ${pidFile}; sleep 30; wait`, timeoutMs: 500 })
    expect(outcome.ok).toBe(false)
    expect(outcome.output).toContain('timed out after 500 ms')
    expect(processGroupAlive(Number(readFileSync(pidFile, 'utf8')))).toBe(false)
  })

  it('kills the command when the tool call is interrupted', async () => {
    const pidFile = inWs('pid')
    const fiber = Effect.runFork(runTool(ws, { name: 'exec', arguments: JSON.stringify({ command: `sleep 30 & echo $$ > ${pidFile}; sleep 30; wait` }) }))
    while (!existsSync(pidFile) || readFileSync(pidFile, 'utf8').trim() === '') {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const pgid = Number(readFileSync(pidFile, 'utf8'))
    expect(processGroupAlive(pgid)).toBe(true)
    await Effect.runPromise(Fiber.interrupt(fiber))
    expect(processGroupAlive(pgid)).toBe(false)
  })

  it('does not hand credential-like environment variables to the command', async () => {
    process.env['AGENTVISOR_TEST_API_KEY'] = 'sk-should-not-leak'
    try {
      const outcome = await call('exec', { command: 'env' })
      expect(outcome.ok).toBe(true)
      expect(outcome.output).toContain('PATH=')
      expect(outcome.output).not.toContain('sk-should-not-leak')
    } finally {
      delete process.env['AGENTVISOR_TEST_API_KEY']
    }
  })
})

describe('malformed calls', () => {
  it('answers invalid JSON with the reason and writes nothing', async () => {
    const outcome = await call('write_file', '{"path": "a.txt", "content": ')
    expect(outcome.ok).toBe(false)
    expect(outcome.output).toMatch(/^Invalid arguments for write_file: not valid JSON/)
    expect(readdirSync(ws.root)).toEqual([])
  })

  it('names a missing required field', async () => {
    expect(await call('write_file', { path: 'a.txt' })).toEqual({
      ok: false,
      output: 'Invalid arguments for write_file: missing required field "content"'
    })
  })

  it('names a field of the wrong type', async () => {
    expect(await call('read_file', { path: 42 })).toEqual({
      ok: false,
      output: 'Invalid arguments for read_file: field "path" must be a string, got number'
    })
    expect((await call('exec', { command: 'true', timeoutMs: 'soon' })).output).toBe(
      'Invalid arguments for exec: field "timeoutMs" must be a positive integer, got "soon"'
    )
  })

  it('rejects arguments that are JSON but not an object', async () => {
    expect((await call('read_file', '["a.txt"]')).output).toBe('Invalid arguments for read_file: expected a JSON object, got an array')
  })

  it('answers an unknown tool with the list of available tools', async () => {
    expect(await call('delete_everything', {})).toEqual({
      ok: false,
      output: 'Unknown tool "delete_everything". Available tools: read_file, write_file, list_dir, exec'
    })
  })
})
