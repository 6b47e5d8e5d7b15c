import { parseArgs } from 'node:util'

/** Bad command-line input: printed as one line, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError'
}

/** Exit codes of docs/cli.md. */
export const ExitCode = { succeeded: 0, failed: 1, usage: 2, paused: 3 } as const
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode]

/** `node:util` parseArgs with its errors turned into one-line usage errors. */
type OptionSpec = Readonly<Record<string, { readonly type: 'string' | 'boolean' }>>
type OptionValues<T extends OptionSpec> = { [K in keyof T]?: T[K]['type'] extends 'boolean' ? boolean : string }

export const parseCommandArgs = <T extends OptionSpec>(
  argv: string[],
  options: T,
  positionals: { min: number; max: number; names: string }
): { values: OptionValues<T>; positionals: string[] } => {
  let parsed
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true })
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message.replace(/\.? To specify.*$/s, '') : String(error))
  }
  const count = parsed.positionals.length
  if (count < positionals.min) throw new UsageError(`missing ${positionals.names}`)
  if (count > positionals.max) throw new UsageError(`unexpected argument "${parsed.positionals[positionals.max]}"`)
  return { values: parsed.values as OptionValues<T>, positionals: parsed.positionals }
}
