import { terminalSafe, terminalSafeJson } from './terminal-text.js'

/**
 * Human progress goes to stderr; stdout is kept for `--json`. The line is made terminal-safe:
 * it quotes goals, paths, targets and error messages nobody here wrote (docs/cli.md, "Output").
 */
export const say = (line: string): void => {
  process.stderr.write(`${terminalSafe(line)}\n`)
}

/** Prints the one JSON object that is the last line of stdout for `--json`. */
export const printJson = (value: unknown): void => {
  printJsonText(JSON.stringify(value))
}

/**
 * `printJson` for a value already serialised (a large listing built by the database): one
 * write, the newline included, however long the text. Node flushes it before the process exits.
 * The characters a terminal could act on that JSON leaves raw (C1, bidi controls) are escaped.
 */
export const printJsonText = (json: string): void => {
  process.stdout.write(`${terminalSafeJson(json)}\n`)
}

export const elapsed = (startedAt: number): string => {
  const ms = Date.now() - startedAt
  return ms < 1000 ? `${ms}ms` : `${(ms / 1000).toFixed(1)}s`
}

/** `1,234 tokens (1,000 in, 234 out), $0.0012`: a run's usage as a person reads it. */
export const describeUsage = (usage: { readonly inputTokens: number; readonly outputTokens: number; readonly costUsd?: number }): string => {
  const tokens = `${(usage.inputTokens + usage.outputTokens).toLocaleString('en-US')} tokens (${usage.inputTokens.toLocaleString('en-US')} in, ${usage.outputTokens.toLocaleString('en-US')} out)`
  return usage.costUsd === undefined ? tokens : `${tokens}, $${usage.costUsd}`
}
