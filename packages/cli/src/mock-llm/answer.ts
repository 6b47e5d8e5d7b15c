import { SCRIPT_EXHAUSTED_TEXT, type ScriptedStep } from '@agentvisor/core'

/** A tool call the mock sends, arguments already as the JSON text the model "wrote". */
export interface MockToolCall {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

/** A successful scripted answer, before it is rendered in one provider's wire format. */
export interface MockAnswer {
  readonly text: string
  readonly toolCalls: ReadonlyArray<MockToolCall>
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number }
}

/** Roughly four characters a token: enough for budgets and traces to show plausible numbers. */
export const estimateTokens = (text: string): number => Math.max(1, Math.ceil(text.length / 4))

/**
 * The answer a step scripts (`undefined`: the script is used up, so plain "done"). Tool call ids
 * are `<prefix>_<step>_<n>`: deterministic, so tests can assert the ids the client sends back.
 */
export const answerOf = (step: ScriptedStep | undefined, stepNumber: number, idPrefix: string, requestBody: unknown): MockAnswer => {
  const text = step === undefined ? SCRIPT_EXHAUSTED_TEXT : (step.text ?? '')
  const toolCalls = (step?.toolCalls ?? []).map((call, i) => ({
    id: `${idPrefix}_${stepNumber}_${i + 1}`,
    name: call.name,
    // A string is sent verbatim so a scenario can script malformed arguments.
    arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {})
  }))
  const usage = step?.usage ?? {
    inputTokens: estimateTokens(JSON.stringify(requestBody ?? '')),
    outputTokens: estimateTokens(text + toolCalls.map((call) => call.name + call.arguments).join(''))
  }
  return { text, toolCalls, usage }
}
