#!/usr/bin/env node
import { endsWhenFlushed, exitWhenFlushed, main } from '../dist/main.js'

// A reader that stops early (`agentvisor runs | head`) closes the pipe: the output is no longer
// wanted, which is no error of ours to report with a stack trace.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  throw error
})

// Started by a parent that holds the other end of a pipe (docs/cli.md, "Ending with the parent"):
// ends with that parent, however it ends. Loaded only then, so other starts pay nothing for it.
if (process.env.AGENTVISOR_EXIT_WITH_PARENT !== undefined) {
  const problem = (await import('../dist/process/tether.js')).exitWithParent()
  if (problem !== undefined) {
    process.stderr.write(`agentvisor: ${problem}\n`)
    process.exit(2)
  }
}

const argv = process.argv.slice(2)
main(argv).then(
  (code) => {
    process.exitCode = code
    if (endsWhenFlushed(argv)) void exitWhenFlushed(code)
  },
  (error) => {
    // main() reports every expected failure itself; this is the last line of defence.
    process.stderr.write(`agentvisor: internal error: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = 1
  }
)
