import { Either } from 'effect'
import type { OutputSchema } from '../contract/agent-spec.js'
import { compileJsonSchema } from '../contract/output-schema.js'
import { describeViolations } from '../schema/json-schema-check.js'
import { decodeArgumentsObject } from './tool-arguments.js'
import type { CallableTool, ToolArguments } from './tool-definition.js'
import { succeeded } from './tool-outcome.js'

/** The tool an agent with an `output` ends its work with (docs/agents.md, "Structured results"). */
export const FINAL_ANSWER = 'final_answer'

/**
 * What an accepted `final_answer` answers the model. The run reads a step's final answer back
 * from its conversation by this text (a rejected one answers `Invalid arguments for ...`), so a
 * resumed run finds it in its stored steps like a live one (docs/agents.md).
 */
export const FINAL_ANSWER_ACCEPTED = 'Final answer accepted.'

/**
 * `final_answer`, whose parameters are the agent's `output` schema: arguments that validate end
 * the agent's work and become the run's `output`; arguments that do not are answered with every
 * violation (JSON pointer and message) and the run goes on. It does nothing in the world, so it
 * is `read` and not judged by the policy (ending one's work is no act on anything).
 */
export const finalAnswerTool = (schema: OutputSchema): CallableTool<ToolArguments> => {
  // The contract's own check compiled this schema already: a failure here is a contract nobody checked.
  const check = Either.getOrThrow(compileJsonSchema(schema, true))
  return {
    name: FINAL_ANSWER,
    source: 'builtin',
    spec: {
      name: FINAL_ANSWER,
      description:
        'End your work with its result. Call it once the goal is reached, alone in your answer: its arguments are your result and must match this schema. Invalid arguments are answered with what is wrong; call it again corrected.',
      parameters: schema
    },
    effect: 'read',
    runsAs: 'call',
    decode: (raw) =>
      Either.flatMap(decodeArgumentsObject(raw), (fields) => {
        const violations = check(fields)
        return violations.length === 0 ? Either.right(fields) : Either.left(`the result does not match the output schema: ${describeViolations(violations)}`)
      }),
    policy: () => undefined,
    run: () => succeeded(FINAL_ANSWER_ACCEPTED)
  }
}
