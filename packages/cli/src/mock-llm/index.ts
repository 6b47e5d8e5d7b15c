/** The scripted OpenAI/Anthropic-compatible server behind `agentvisor mock-llm`, for demos and tests. */
export { startMockLlm, type MockLlm, type MockLlmOptions } from './server.js'
export type { RecordedRequest } from './request-log.js'
export { loadScenarios, decodeScenarios, makeScenarioPlayer, MockScenarios, ANY_MODEL, type PlayedStep } from './scenarios.js'
export { runMockLlmCommand, type MockLlmCommandOptions } from './command.js'
export { estimateTokens, type MockAnswer, type MockToolCall } from './answer.js'
