// The team's own tools (docs/tools.md): every `defineTool` export of this module is a tool a task
// may offer its agents by name. The tickets live in a JSON file beside it, standing in for a tracker.
import { readFileSync } from 'node:fs'
import { defineTool } from '@agentvisor/core'

const tickets = JSON.parse(readFileSync(new URL('./tickets.json', import.meta.url), 'utf8'))

export const lookupTicket = defineTool({
  name: 'lookup_ticket',
  description: 'The title, reporter, status and comments of a ticket, by id (T-<number>)',
  input: { type: 'object', properties: { id: { type: 'string', pattern: '^T-[0-9]+$' } }, required: ['id'], additionalProperties: false },
  // No side effect: never journalled, and allowed by the policy unless a rule says otherwise.
  effect: 'read',
  run: ({ id }) => tickets[id] ?? `No ticket ${id}`
})
