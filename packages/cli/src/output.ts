/** Human progress goes to stderr; stdout is kept for `--json`. */
export const say = (line: string): void => {
  process.stderr.write(`${line}\n`)
}

/** Prints the one JSON object that is the last line of stdout for `--json`. */
export const printJson = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value)}\n`)
}

export const elapsed = (startedAt: number): string => {
  const ms = Date.now() - startedAt
  return ms < 1000 ? `${ms}ms` : `${(ms / 1000).toFixed(1)}s`
}
