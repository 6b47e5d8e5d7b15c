import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

const SCRIPT = path.join(import.meta.dirname, '..', 'scripts', 'house-metrics.mjs')

const made: string[] = []
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A tree of `packages/` with the given files (paths under packages/), each package with its manifest. */
const tree = (files: Record<string, string>): string => {
  const root = mkdtempSync(path.join(tmpdir(), 'house-metrics-'))
  made.push(root)
  const write = (file: string, text: string): void => {
    mkdirSync(path.dirname(file), { recursive: true })
    writeFileSync(file, text)
  }
  for (const [name, text] of Object.entries(files)) {
    write(path.join(root, 'packages', name), text)
    const pkg = name.split('/')[0]!
    write(path.join(root, 'packages', pkg, 'package.json'), JSON.stringify({ name: `@demo/${pkg}`, exports: { '.': { source: './src/index.ts' } } }))
  }
  return root
}

/** What `npm run lint`'s cycle check says of a tree. */
const checkCycles = (root: string) => {
  const run = spawnSync(process.execPath, [SCRIPT, '--check-cycles', '--root', root], { encoding: 'utf8' })
  return { code: run.status, stderr: run.stderr, stdout: run.stdout }
}

/** The check fails on `ring`, naming the ring's files in `named`, and passes on the same tree with `cut` written over it. */
const expectRingCaughtAndCut = (ring: Record<string, string>, named: string, cut: Record<string, string>): void => {
  const failing = checkCycles(tree(ring))
  expect(failing.code).toBe(1)
  expect(failing.stderr).toContain(named)

  const passing = checkCycles(tree({ ...ring, ...cut }))
  expect(passing.stderr).toBe('')
  expect(passing.code).toBe(0)
}

describe('the import-cycle check of npm run lint (scripts/house-metrics.mjs --check-cycles)', () => {
  it('fails on a ring of type-only imports, naming its files, and passes once the ring is cut', () => {
    expectRingCaughtAndCut(
      {
        'one/src/run.ts': "import type { Step } from './step.js'\nexport interface Run { readonly steps: Step[] }\n",
        'one/src/step.ts': "import type { Run } from './run.js'\nexport interface Step { readonly run: Run }\n"
      },
      'import cycle (2 files): packages/one/src/run.ts, packages/one/src/step.ts',
      { 'one/src/step.ts': 'export interface Step { readonly runId: string }\n' }
    )
  })

  it('fails on a ring of value imports across packages (through their exports maps) and passes once the ring is cut', () => {
    expectRingCaughtAndCut(
      {
        'low/src/index.ts': "import { top } from '@demo/high'\nexport const low = (): number => top.length\n",
        'high/src/index.ts': "import { helper } from './helper.js'\nexport const top = helper()\n",
        'high/src/helper.ts': "import { low } from '@demo/low'\nexport const helper = (): string => String(low)\n"
      },
      'import cycle (3 files): packages/high/src/helper.ts, packages/high/src/index.ts, packages/low/src/index.ts',
      { 'low/src/index.ts': 'export const low = (): number => 1\n' }
    )
  })

  it('fails on a file that imports itself', () => {
    const failing = checkCycles(tree({ 'one/src/index.ts': "export type Self = typeof import('./index.js')\n" }))
    expect(failing.code).toBe(1)
    expect(failing.stderr).toContain('import cycle (1 files): packages/one/src/index.ts')
  })
})
