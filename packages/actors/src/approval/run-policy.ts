import { compilePolicy, type CompiledPolicy, type RememberedRule, type TaskContract } from '@agentvisor/core'
import { type Executor, listRememberedRules, type RememberedRuleRow, type RunWriter, type StoreError } from '@agentvisor/store'
import { Effect, Either } from 'effect'

const policyOf = (contract: TaskContract, remembered: ReadonlyArray<RememberedRuleRow>): Either.Either<CompiledPolicy, string> => {
  const rules: RememberedRule[] = remembered.map((r) => ({ act: r.act as RememberedRule['act'], pattern: r.pattern, decision: r.decision }))
  const layers = contract.policy?.layers
  if (!Array.isArray(layers)) return Either.left('its stored policy is not readable')
  return Either.mapLeft(compilePolicy(layers, rules), (error) => `its stored policy is not valid: ${error.message}`)
}

/**
 * The policy a run is checked against: its contract's layers plus the decisions remembered for
 * its workspace. Succeeds with the reason as a string when it cannot be built (the caller
 * refuses to run rather than run permissively); fails only when the store cannot be read.
 */
export const loadRunPolicy = (db: Executor, contract: TaskContract): Effect.Effect<Either.Either<CompiledPolicy, string>, StoreError> =>
  Effect.map(listRememberedRules(db, contract.workspace), (remembered) => policyOf(contract, remembered))

/**
 * `loadRunPolicy` through the run's writer, as a run's start and resume read it: a prepared
 * statement on SQLite, answered at once (docs/architecture.md, "The hot path").
 */
export const runPolicyOf = (writer: RunWriter, contract: TaskContract): Effect.Effect<Either.Either<CompiledPolicy, string>, StoreError> =>
  Effect.map(writer.rememberedRules(contract.workspace), (remembered) => policyOf(contract, remembered))
