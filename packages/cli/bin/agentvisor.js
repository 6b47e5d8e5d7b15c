#!/usr/bin/env node
import { endsWhenFlushed, exitWhenFlushed, main } from '../dist/main.js'

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
