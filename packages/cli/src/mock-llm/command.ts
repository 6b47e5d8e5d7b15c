import { loadScenarios, type MockScenarios } from './scenarios.js'
import { type MockLlm, startMockLlm } from './server.js'
import { terminalSafe } from '../terminal-text.js'

/** The `agentvisor mock-llm` options, as parsed by the CLI. */
export interface MockLlmCommandOptions {
  /** Path of the scenarios file (JSON or YAML). */
  readonly scenarios: string
  readonly port: number
  /** Appends every request as one JSON line to this file. */
  readonly record?: string | undefined
}

const oneLine = (error: unknown): string => (error instanceof Error ? error.message : String(error)).split('\n')[0]!

/**
 * `agentvisor mock-llm`: serves the scenarios on 127.0.0.1 until SIGINT/SIGTERM, then closes and
 * resolves 0. Prints exactly one line to stdout (`mock-llm listening on URL`) so scripts can wait
 * for it. A bad scenarios file is a usage error: one line on stderr, resolves 2; a port that
 * cannot be bound resolves 1.
 */
export const runMockLlmCommand = async (options: MockLlmCommandOptions): Promise<number> => {
  let scenarios: MockScenarios
  try {
    scenarios = await loadScenarios(options.scenarios)
  } catch (error) {
    process.stderr.write(`agentvisor: ${terminalSafe(oneLine(error))}\n`)
    return 2
  }
  let mock: MockLlm
  try {
    mock = await startMockLlm({ scenarios, port: options.port, recordFile: options.record })
  } catch (error) {
    process.stderr.write(`agentvisor: mock-llm cannot listen on port ${options.port}: ${terminalSafe(oneLine(error))}\n`)
    return 1
  }
  process.stdout.write(`mock-llm listening on ${mock.url}\n`)
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
      resolve()
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
  })
  await mock.close()
  return 0
}
