import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { Effect } from 'effect'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { openWorkspace, verify, verifyNow, type VerifySpec, type Workspace } from '@agentvisor/core'

let base: string
let ws: Workspace

beforeEach(async () => {
  base = realpathSync(mkdtempSync(path.join(tmpdir(), 'agentvisor-verify-')))
  ws = await Effect.runPromise(openWorkspace(path.join(base, 'ws')))
})

afterEach(() => rmSync(base, { recursive: true, force: true }))

const check = (spec: VerifySpec) => Effect.runPromise(verify(ws, spec))
const write = (name: string, text: string) => writeFileSync(path.join(ws.root, name), text)

describe('verify', () => {
  it('passes fileContains when the file holds the text', async () => {
    write('out.txt', 'all DONE here')
    expect(await check({ fileContains: { path: 'out.txt', text: 'DONE' } })).toEqual({
      passed: true,
      detail: 'out.txt contains "DONE"'
    })
  })

  it('fails fileContains with a sentence naming the file and the missing text', async () => {
    write('out.txt', 'not yet')
    expect(await check({ fileContains: { path: 'out.txt', text: 'DONE' } })).toEqual({
      passed: false,
      detail: 'out.txt does not contain "DONE"'
    })
  })

  it('fails fileContains when the file does not exist', async () => {
    expect(await check({ fileContains: { path: 'out.txt', text: 'DONE' } })).toEqual({
      passed: false,
      detail: 'out.txt does not exist'
    })
  })

  it('passes fileEquals only on exactly the expected content', async () => {
    write('out.txt', 'DONE')
    expect((await check({ fileEquals: { path: 'out.txt', text: 'DONE' } })).passed).toBe(true)
  })

  it('fails fileEquals on a trailing newline difference and says so', async () => {
    write('out.txt', 'DONE\n')
    expect(await check({ fileEquals: { path: 'out.txt', text: 'DONE' } })).toEqual({
      passed: false,
      detail: 'out.txt does not have the expected content: it has an extra trailing newline'
    })
  })

  it('fails fileEquals on different content, pointing at the first difference', async () => {
    write('out.txt', 'DONX')
    expect(await check({ fileEquals: { path: 'out.txt', text: 'DONE' } })).toEqual({
      passed: false,
      detail: 'out.txt does not have the expected content: they first differ at character 4'
    })
  })

  it('runs a command in the workspace and passes on exit code 0 by default', async () => {
    write('marker.txt', 'x')
    expect(await check({ command: { run: 'test -f marker.txt' } })).toEqual({
      passed: true,
      detail: '`test -f marker.txt` exited with 0'
    })
  })

  it('fails a command with another exit code and quotes its output', async () => {
    const result = await check({ command: { run: 'echo "2 tests failed"; exit 1' } })
    expect(result.passed).toBe(false)
    expect(result.detail).toBe('`echo "2 tests failed"; exit 1` exited with 1 (expected 0); output:\n2 tests failed')
  })

  it('honours an expected non-zero exit code', async () => {
    expect((await check({ command: { run: 'exit 3', exitCode: 3 } })).passed).toBe(true)
    expect((await check({ command: { run: 'exit 0', exitCode: 3 } })).passed).toBe(false)
  })

  it('passes allOf only when every check passes and reports the first failure', async () => {
    write('a.txt', 'alpha')
    write('b.txt', 'beta')
    const spec = (bText: string): VerifySpec => ({
      allOf: [
        { fileContains: { path: 'a.txt', text: 'alpha' } },
        { fileEquals: { path: 'b.txt', text: bText } },
        { fileContains: { path: 'c.txt', text: 'gamma' } }
      ]
    })
    expect(await check(spec('beta'))).toEqual({ passed: false, detail: 'c.txt does not exist' })
    expect((await check(spec('BETA'))).detail).toMatch(/^b\.txt does not have the expected content/)
    write('c.txt', 'gamma')
    expect(await check(spec('beta'))).toEqual({ passed: true, detail: 'all 3 checks passed' })
  })

  it('reads the whole of a file past 1 MiB (read without blocking) and finds the text at its very end', async () => {
    write('log.txt', `${'x'.repeat(3 * 1024 * 1024)}DONE`)
    expect(await check({ fileContains: { path: 'log.txt', text: 'DONE' } })).toEqual({ passed: true, detail: 'log.txt contains "DONE"' })
    expect(await check({ fileEquals: { path: 'log.txt', text: `${'x'.repeat(3 * 1024 * 1024)}DONE` } })).toEqual({
      passed: true,
      detail: 'log.txt has exactly the expected content'
    })
  })

  it('answers file checks and an allOf of them at once, as a value, and a command as an Effect to run', async () => {
    write('a.txt', 'alpha')
    expect(verifyNow(ws, { fileContains: { path: 'missing.txt', text: 'DONE' } })).toEqual({ passed: false, detail: 'missing.txt does not exist' })
    expect(verifyNow(ws, { fileEquals: { path: 'a.txt', text: 'alpha' } })).toEqual({ passed: true, detail: 'a.txt has exactly the expected content' })
    expect(
      verifyNow(ws, {
        allOf: [{ fileContains: { path: 'a.txt', text: 'alpha' } }, { fileContains: { path: 'out/b.txt', text: 'beta' } }]
      })
    ).toEqual({ passed: false, detail: 'out/b.txt does not exist' })
    const command = verifyNow(ws, { allOf: [{ fileContains: { path: 'a.txt', text: 'alpha' } }, { command: { run: 'test -f a.txt' } }] })
    expect(Effect.isEffect(command)).toBe(true)
    expect(await Effect.runPromise(command as Effect.Effect<unknown>)).toEqual({ passed: true, detail: 'all 2 checks passed' })
  })

  it('fails a check whose path escapes the workspace with the boundary message', async () => {
    const outside = path.join(base, 'outside')
    mkdirSync(outside)
    writeFileSync(path.join(outside, 'out.txt'), 'DONE')
    symlinkSync(outside, path.join(ws.root, 'link'))
    expect(await check({ fileContains: { path: '../outside/out.txt', text: 'DONE' } })).toEqual({
      passed: false,
      detail: 'Path escapes the workspace boundary: ../outside/out.txt'
    })
    expect(await check({ fileEquals: { path: 'link/out.txt', text: 'DONE' } })).toEqual({
      passed: false,
      detail: 'Path escapes the workspace boundary: link/out.txt'
    })
  })
})
