import { readFile } from 'node:fs/promises'
import { ContractError, parseTaskText, ScriptedStep } from '@agentvisor/core'
import { Either, ParseResult, Schema } from 'effect'

/** The model name whose steps answer every model the file does not list. */
export const ANY_MODEL = '*'

/**
 * A scenarios file: per model name, the steps it plays in order (the `ScriptedStep`s of the
 * `scripted` provider), `"*"` for any model not listed.
 *
 * @example
 * { "models": { "gpt-4o-mini": [{ "error": { "status": 503, "retryAfterMs": 0 } }, { "text": "hi" }], "*": [{ "text": "done" }] } }
 */
export const MockScenarios = Schema.Struct({
  models: Schema.Record({ key: Schema.String, value: Schema.Array(ScriptedStep) }),
  /**
   * `request` (default): each request plays the model's next step. `turn`: the step is picked
   * by the conversation's turn (how many assistant messages the request carries), so a request
   * sent again after a crash gets the same answer: what crash and resume tests need.
   */
  replay: Schema.optional(Schema.Literal('request', 'turn')),
  /**
   * Scripts chosen by the conversation's goal instead of the model: the first key found in the
   * request's first user message wins, else `models` applies. How one mock plays a parent and
   * its children, which share a provider and so a model name.
   */
  goals: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Array(ScriptedStep) }))
})
export type MockScenarios = typeof MockScenarios.Type

const decode = Schema.decodeUnknownEither(MockScenarios, { errors: 'first', onExcessProperty: 'error' })

/** Validates parsed scenarios; the error names the bad field (`models.gpt.0.delayMs: ...`) in one line. */
export const decodeScenarios = (input: unknown, source?: string): Either.Either<MockScenarios, ContractError> =>
  Either.mapLeft(decode(input), (error) => {
    const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
    const field = issue === undefined ? '' : issue.path.map(String).join('.')
    const detail = issue === undefined ? error.message : issue._tag === 'Unexpected' ? 'is not a known field' : issue.message.split('\n')[0]!
    const prefix = source === undefined ? '' : `${source}: `
    return new ContractError({ message: `${prefix}${field === '' ? detail : `${field}: ${detail}`}`, field, source })
  })

/** Reads a scenarios file (JSON for `.json`, YAML otherwise) and validates it; rejects with a one-line `ContractError`. */
export const loadScenarios = async (file: string): Promise<MockScenarios> => {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    throw new ContractError({ message: `${file}: cannot read scenarios file (${(error as NodeJS.ErrnoException).code ?? String(error)})`, source: file })
  }
  const parsed = Either.flatMap(parseTaskText(text, file), (raw) => decodeScenarios(raw, file))
  if (Either.isLeft(parsed)) {
    const error = parsed.left
    throw error.message.startsWith(file) ? error : new ContractError({ message: `${file}: ${error.message}`, field: error.field, source: file })
  }
  return parsed.right
}

/** The step a request plays, and its 1-based number in that model's script; `step` undefined once used up. */
export interface PlayedStep {
  readonly step: ScriptedStep | undefined
  readonly number: number
}

/**
 * Hands out steps: every requested model name has its own counter, playing its own list or, when
 * the file does not name it, the `"*"` list. Past the end (or with neither list) the step is
 * undefined, which the server answers with plain "done".
 */
export const makeScenarioPlayer = (scenarios: MockScenarios): { next(model: string, turn: number, goal?: string): PlayedStep } => {
  const counters = new Map<string, number>()
  return {
    next: (model, turn, goal = '') => {
      const goalKey = Object.keys(scenarios.goals ?? {}).find((key) => goal.includes(key))
      const counter = goalKey === undefined ? model : `goal:${goalKey}`
      const number = scenarios.replay === 'turn' ? turn + 1 : (counters.get(counter) ?? 0) + 1
      counters.set(counter, number)
      const steps =
        goalKey !== undefined ? scenarios.goals![goalKey] : Object.hasOwn(scenarios.models, model) ? scenarios.models[model] : scenarios.models[ANY_MODEL]
      return { step: steps?.[number - 1], number }
    }
  }
}
