import { type MockLlm, startMockLlm } from '@agentvisor/cli'
import { afterEach } from 'vitest'

/**
 * A mock LLM server per test, closed after each: called once at the top of a test file, it
 * gives the function that starts one answering `model` with `steps` in order (docs/mock-llm.md).
 *
 * @example
 * const startMock = mockLlmPerTest('test-model')
 * it('...', async () => { const llm = await startMock([{ text: 'ok' }]) })
 */
export const mockLlmPerTest = (defaultModel = 'm'): ((steps: unknown[], model?: string) => Promise<MockLlm>) => {
  let current: MockLlm | undefined
  afterEach(async () => {
    await current?.close()
    current = undefined
  })
  return async (steps, model = defaultModel) => {
    current = await startMockLlm({ scenarios: { models: { [model]: steps } } as never, port: 0 })
    return current
  }
}
