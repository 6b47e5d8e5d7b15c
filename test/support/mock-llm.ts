import { type MockLlm, type MockLlmOptions, type MockScenarios, startMockLlm } from '@agentvisor/cli'
import { afterEach } from 'vitest'

type ServerOptions = Omit<MockLlmOptions, 'scenarios' | 'port'>

/** Starts a mock LLM over real HTTP on a free 127.0.0.1 port (docs/mock-llm.md), closed after its test. */
export interface StartMockLlm {
  /** One answering `model` (the file's default) with `steps` in order. */
  (steps: ReadonlyArray<unknown>, model?: string): Promise<MockLlm>
  /** One playing a whole scenario file's content: `models`, `goals`, `replay`; `options` as startMockLlm's. */
  readonly scenarios: (scenarios: unknown, options?: ServerOptions) => Promise<MockLlm>
}

/**
 * The mock LLMs of a test file: called once at the top of the file, it gives the function that
 * starts one. Every one a test started is closed after it, however the test ended (closing one
 * earlier, to start the next, is fine: a second close is a no-op).
 *
 * @example
 * const startMock = mockLlmPerTest('test-model')
 * it('...', async () => { const llm = await startMock([{ text: 'ok' }]) })
 */
export const mockLlmPerTest = (defaultModel = 'm'): StartMockLlm => {
  const started: MockLlm[] = []
  afterEach(async () => {
    for (const mock of started.splice(0)) await mock.close()
  })
  // The scenarios of a test are literals the server plays as given; the CLI is what decodes a file.
  const scenarios = async (played: unknown, options: ServerOptions = {}) => {
    const mock = await startMockLlm({ scenarios: played as MockScenarios, port: 0, ...options })
    started.push(mock)
    return mock
  }
  return Object.assign((steps: ReadonlyArray<unknown>, model = defaultModel) => scenarios({ models: { [model]: steps } }), { scenarios })
}
