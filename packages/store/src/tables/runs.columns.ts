// The JSON columns of `runs` and `run_contracts`, each read through one Schema. Apart from
// runs.table.ts because `agentvisor runs` loads that file without Effect (see runs.ts).
import {
  ApprovalMode,
  ChildLimits,
  checkedStoredContract,
  ErrorKind,
  Lineage,
  PolicyLayer,
  Pricing,
  ProviderConfig,
  StoredAgentFields,
  StoredLimits,
  VerifySpec
} from '@agentvisor/core'
import * as Either from 'effect/Either'
import * as Schema from 'effect/Schema'
import { decodeJsonAt, type JsonColumn, jsonColumn } from '../json-column.js'
import type { RunRow, RunWithContract, StoredRunRow } from './runs.table.js'

const KINDS = Object.values(ErrorKind)

/** `runs.error_json`: the `RunError` a finished run carries. */
export const RunErrorJson = Schema.parseJson(
  Schema.Struct({
    // A refinement, not a union of literals: Effect would name each member apart.
    kind: Schema.String.pipe(
      Schema.filter((kind): kind is ErrorKind => (KINDS as ReadonlyArray<string>).includes(kind), {
        message: (issue) => `Expected one of ${KINDS.join(', ')}, actual ${JSON.stringify(issue.actual)}`
      })
    ),
    message: Schema.String,
    httpStatus: Schema.optional(Schema.Number),
    provider: Schema.optional(Schema.String)
  })
)

/**
 * `run_contracts.contract_json`: the contract as the run was started with, defaults applied
 * (docs/task-file.md). Checked with the task file's own parts, so a contract that decodes is one
 * agentvisor could have written.
 */
export const ContractJson = Schema.parseJson(
  Schema.Struct({
    goal: Schema.String,
    workspace: Schema.String,
    providers: Schema.NonEmptyArray(ProviderConfig),
    verify: Schema.optional(VerifySpec),
    limits: StoredLimits,
    policy: Schema.Struct({ layers: Schema.Array(PolicyLayer) }),
    approval: ApprovalMode,
    children: Schema.required(ChildLimits),
    sandbox: Schema.optional(Schema.Struct({ exec: Schema.Literal('bwrap'), network: Schema.Boolean })),
    lineage: Schema.optional(Lineage),
    pricing: Schema.optional(Pricing),
    ...StoredAgentFields
  })
)

const decodeError = jsonColumn(RunErrorJson)
const decodeContractBySchema = jsonColumn(ContractJson)
/**
 * Every run's resume reads its contract: the check by hand takes what agentvisor writes, at a
 * fraction of the Schema's cost; whatever it does not take (a corrupt row) goes through the
 * Schema, which names what is wrong (docs/durability.md, "Corrupt rows").
 */
const decodeContract: JsonColumn<typeof ContractJson.Type> = (text) => {
  const checked = checkedStoredContract(text)
  return checked !== undefined ? Either.right(checked as typeof ContractJson.Type) : decodeContractBySchema(text)
}

/** A `runs` row with its error decoded; throws `StoreError` when it does not decode. */
export const decodeRunRow = (stored: Omit<StoredRunRow, 'usage_json'> & { readonly usage_json?: string | null }): RunRow => {
  const { error_json, ...row } = stored
  return {
    ...row,
    usage_json: row.usage_json ?? null,
    // Absent from rows read by a store that predates forks (and from list queries): not a fork.
    forked_from_run: row.forked_from_run ?? null,
    forked_from_seq: row.forked_from_seq ?? null,
    error: error_json === null ? null : decodeJsonAt(decodeError, error_json, { runId: row.id, column: 'runs.error_json' })
  }
}

/** A run with its error and contract decoded; throws `StoreError` when either does not decode. */
export const decodeRunWithContract = (
  stored: Omit<StoredRunRow, 'usage_json'> & { readonly usage_json?: string | null } & { readonly contract_json: string }
): RunWithContract => {
  const { contract_json, ...row } = stored
  return { ...decodeRunRow(row), contract: decodeJsonAt(decodeContract, contract_json, { runId: row.id, column: 'run_contracts.contract_json' }) }
}

/** A run's contract alone; throws `StoreError` when it does not decode. */
export const decodeContractJson = (runId: string, contractJson: string): RunWithContract['contract'] =>
  decodeJsonAt(decodeContract, contractJson, { runId, column: 'run_contracts.contract_json' })
