#!/usr/bin/env node
import { main } from '../dist/main.js'

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code },
  (error) => {
    // main() reports every expected failure itself; this is the last line of defence.
    process.stderr.write(`agentvisor: internal error: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = 1
  }
)
