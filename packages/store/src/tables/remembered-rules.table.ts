import type { Insertable, Selectable } from 'kysely'

/** A decision remembered with `--remember`: it applies to later runs of the same workspace. */
export interface RememberedRulesTable {
  /** The workspace's absolute path. */
  workspace: string
  act: string
  /** The exact target (path or command) the decision was about. */
  pattern: string
  decision: 'allow' | 'deny'
  /** The run whose approval created it. */
  run_id: string | null
  created_at: string
}

export type RememberedRuleRow = Selectable<RememberedRulesTable>
export type NewRememberedRule = Insertable<RememberedRulesTable>
