import { spawnSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { tempDir } from './support/cli.js'

// What docs/install.md promises a team: the packed packages install into a project of their own
// (no workspace links), type-check there with skipLibCheck off, and run.
const ROOT = fileURLToPath(new URL('..', import.meta.url))
const PACKAGES = ['core', 'store', 'actors', 'cli'] as const

const sh = (command: string, args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv = {}) => {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false', ...env } })
  return { code: result.status, out: `${result.stdout}${result.stderr}` }
}

/**
 * better-sqlite3's binary for this Node as the prebuilt its install script looks for (its
 * `prebuild-install` reads a folder named by `npm_config_better_sqlite3_local_prebuilds` before
 * it downloads), made from the repository's own install: the consumer's install runs the same
 * script and loads the same binary as a user's that downloads it (docs/install.md), without
 * compiling SQLite for minutes on a machine that cannot reach the release files. The compile
 * itself is the repository's own `npm ci` on a fresh machine. A version the consumer does not
 * install finds no file here, and compiles as before.
 */
const localPrebuilds = (work: string): NodeJS.ProcessEnv => {
  const module = path.join(ROOT, 'node_modules', 'better-sqlite3')
  const { version } = JSON.parse(readFileSync(path.join(module, 'package.json'), 'utf8')) as { version: string }
  const folder = path.join(work, 'prebuilds')
  mkdirSync(folder)
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`
  const packed = sh('tar', ['-czf', path.join(folder, name), '-C', module, 'build/Release/better_sqlite3.node'], work)
  expect(packed.code, packed.out).toBe(0)
  return { npm_config_better_sqlite3_local_prebuilds: folder }
}

/** The bare module names a built file imports (`x`, `@scope/x`), `node:` builtins left out. */
const importsOf = (text: string): string[] =>
  [
    ...text.matchAll(/^\s*(?:import|export)\b[^'";]*?\bfrom\s*['"]([^'"]+)['"]/gm),
    ...text.matchAll(/^\s*import\s*['"]([^'"]+)['"]/gm),
    ...text.matchAll(/\b(?:import|require)\(\s*['"]([^'"]+)['"]\s*\)/g)
  ]
    .map((match) => match[1]!)
    .filter((name) => !name.startsWith('.') && !name.startsWith('node:'))
    .map((name) => (name.startsWith('@') ? name.split('/').slice(0, 2).join('/') : name.split('/')[0]!))

const filesUnder = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(path.join(dir, entry.name)) : /\.(js|d\.ts)$/.test(entry.name) ? [path.join(dir, entry.name)] : []
  )

describe('the published packages', () => {
  it('each has its metadata and lists every package its built code imports, as a strict install (pnpm) needs', () => {
    for (const name of PACKAGES) {
      const dir = path.join(ROOT, 'packages', name)
      const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as Record<string, unknown> & {
        dependencies?: Record<string, string>
        files: string[]
      }
      for (const field of ['description', 'repository', 'keywords', 'license', 'engines']) expect(manifest[field], `${name}: ${field}`).toBeDefined()
      expect(readFileSync(path.join(dir, 'README.md'), 'utf8')).toContain(`# @agentvisor/${name}`)
      const declared = new Set([`@agentvisor/${name}`, ...Object.keys(manifest.dependencies ?? {})])
      const undeclared = new Set<string>()
      for (const file of filesUnder(path.join(dir, 'dist')))
        for (const imported of importsOf(readFileSync(file, 'utf8'))) if (!declared.has(imported)) undeclared.add(imported)
      expect([...undeclared], `${name} imports packages it does not list`).toEqual([])
    }
  })

  it('install from their tarballs into a fresh project, type-check there with skipLibCheck off, and run a task with npx agentvisor', {
    timeout: 600_000
  }, () => {
    const work = tempDir('agentvisor-pack-')
    for (const name of PACKAGES) {
      const packed = sh('npm', ['pack', '--pack-destination', work], path.join(ROOT, 'packages', name))
      expect(packed.code, packed.out).toBe(0)
    }
    const tarballs = readdirSync(work).filter((file) => file.endsWith('.tgz'))
    expect(tarballs).toHaveLength(4)

    const project = path.join(work, 'consumer')
    spawnSync('mkdir', [project])
    // As docs/install.md says: better-sqlite3's install script allowed.
    writeFileSync(
      path.join(project, 'package.json'),
      JSON.stringify({ name: 'consumer', private: true, type: 'module', allowScripts: { 'better-sqlite3': true } })
    )
    const installed = sh(
      'npm',
      ['install', '--prefer-offline', '--no-audit', '--no-fund', ...tarballs.map((file) => path.join(work, file)), 'typescript@5.9.3', '@types/node@20.19.43'],
      project,
      localPrebuilds(work)
    )
    expect(installed.code, installed.out).toBe(0)

    writeFileSync(
      path.join(project, 'consumer.ts'),
      `import { Agentvisor, AgentvisorClient, type RunResult, type TaskInput } from '@agentvisor/actors'
import { defineTool } from '@agentvisor/core'
import { openStore } from '@agentvisor/store'

const task = {
  goal: 'Say hi',
  workspace: 'ws',
  providers: [{ name: 'p', kind: 'scripted', steps: [{ text: 'hi' }] }],
  limits: { maxSteps: 2 },
  policy: { layers: [{ name: 'team', allow: { write: ['out/**'] } }] }
} satisfies TaskInput

// @ts-expect-error: a kind that does not exist is a type error
const wrong: TaskInput = { goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'gemini' }] }

export const lookup = defineTool({ name: 'lookup', description: 'Looks up', input: { type: 'object', properties: {} }, effect: 'read', run: async () => 'found' })

export const main = async (): Promise<RunResult> => {
  const av = await Agentvisor.open({ db: 'av.db' })
  try {
    const result = await av.run(task)
    console.log(result.status, result.usage.inputTokens)
    return result
  } finally {
    await av.close()
  }
}
void wrong
void AgentvisorClient
void openStore
`
    )
    writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          skipLibCheck: false,
          noEmit: true,
          types: ['node']
        },
        files: ['consumer.ts']
      })
    )
    const checked = sh(process.execPath, [path.join(project, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.'], project)
    expect(checked.code, checked.out).toBe(0)

    writeFileSync(
      path.join(project, 'task.json'),
      JSON.stringify({
        goal: 'Write DONE into out.txt',
        workspace: 'ws',
        providers: [{ name: 'p', kind: 'scripted', steps: [{ toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }] }],
        verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
        approval: 'auto'
      })
    )
    const ran = sh('npx', ['agentvisor', 'run', 'task.json', '--json'], project)
    expect(ran.code, ran.out).toBe(0)
    expect(
      JSON.parse(
        ran.out
          .trim()
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .at(-1)!
      )
    ).toMatchObject({ status: 'succeeded', steps: 1 })
    expect(readFileSync(path.join(project, 'ws', 'out.txt'), 'utf8')).toBe('DONE')
  })
})
