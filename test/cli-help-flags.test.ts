import { readFileSync } from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { runCli } from './support/cli.js'

const DOCS = readFileSync(path.join(import.meta.dirname, '..', 'docs', 'cli.md'), 'utf8')
const flagsOf = (text: string): string[] => [...new Set([...text.matchAll(/--[a-z][a-z-]*/g)].map((m) => m[0]))].sort()

/** The flags docs/cli.md gives each command, from every `agentvisor COMMAND ...` it quotes. */
const documented = (): Map<string, string[]> => {
  const byCommand = new Map<string, string>()
  for (const m of DOCS.matchAll(/`agentvisor ([a-z-]+)((?:[^`])*)`/g)) byCommand.set(m[1]!, `${byCommand.get(m[1]!) ?? ''} ${m[2]}`)
  return new Map([...byCommand].map(([command, text]) => [command, flagsOf(text)]))
}

/** The flags of the usage lines (`agentvisor COMMAND ...`) in a help text. */
const usageFlags = (help: string, command: string): string[] =>
  flagsOf(
    help
      .split('\n')
      .filter((line) => line.trim().startsWith(`agentvisor ${command} `))
      .join(' ')
  )

describe('--help and docs/cli.md', () => {
  const commands = documented()

  it('document every command of the global --help, and nothing more', async () => {
    const global = (await runCli(['--help'])).stdout
    const listed = [...new Set([...global.matchAll(/^ {2}agentvisor ([a-z-]+)/gm)].map((m) => m[1]!))].sort()
    expect(listed).toEqual([...commands.keys()].sort())
  })

  it('list the same flags for each command: its --help usage, the global --help and docs/cli.md', async () => {
    const global = (await runCli(['--help'])).stdout
    for (const [command, flags] of commands) {
      const own = await runCli([command, '--help'])
      expect(own.code, command).toBe(0)
      // The usage lines come first, before the first blank line.
      expect(usageFlags(own.stdout.split('\n\n')[0]!, command), `${command} --help`).toEqual(flags)
      expect(usageFlags(global, command), `the global --help for ${command}`).toEqual(flags)
    }
  })
})
