import { runMockLlmCommand } from '../mock-llm/index.js'
import { parseCommandArgs, UsageError } from '../usage-error.js'

/** `agentvisor mock-llm --scenarios FILE [--port N] [--record FILE]` */
export const mockLlmCommand = async (argv: string[]): Promise<number> => {
  const { values } = parseCommandArgs(
    argv,
    { scenarios: { type: 'string' }, port: { type: 'string' }, record: { type: 'string' } },
    { min: 0, max: 0, names: '' }
  )
  if (values.scenarios === undefined) throw new UsageError('mock-llm needs --scenarios FILE')
  const port = values.port === undefined ? 0 : Number(values.port)
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be a port number (got "${values.port}")`)
  return runMockLlmCommand({ scenarios: values.scenarios, port, ...(values.record === undefined ? {} : { record: values.record }) })
}
