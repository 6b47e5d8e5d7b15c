import { compilePolicy, type CompiledPolicy, type RememberedRule, type TaskContract } from '@agentvisor/core'
import { type Executor, listRememberedRules } from '@agentvisor/store'
import { Either } from 'effect'

/**
 * The policy a run is checked against: its contract's layers plus the decisions remembered for
 * its workspace. Returns the reason as a string when it cannot be built (the caller refuses to
 * run rather than run permissively).
 */
export const loadRunPolicy = async (db: Executor, contract: TaskContract): Promise<Either.Either<CompiledPolicy, string>> => {
  const remembered = await listRememberedRules(db, contract.workspace)
  const rules: RememberedRule[] = remembered.map((r) => ({ act: r.act as RememberedRule['act'], pattern: r.pattern, decision: r.decision }))
  const layers = contract.policy?.layers
  if (!Array.isArray(layers)) return Either.left('its stored policy is not readable')
  return Either.mapLeft(compilePolicy(layers, rules), (error) => `its stored policy is not valid: ${error.message}`)
}
