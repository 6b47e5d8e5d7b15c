// @ts-check
/** How the page writes ids, times, values, usage and statuses. */

import { h } from './dom.js'

/** @import { ApprovalView, RunView } from '../src/inspector/run-view.js' */

/** @param {string} id */
export const short = (id) => String(id).slice(0, 8)

/** @param {number} n @param {number} [width] */
const pad = (n, width = 2) => String(n).padStart(width, '0')

/** A time of day, to the millisecond if asked. @param {string} iso @param {boolean} [ms] */
export const clock = (iso, ms = false) => {
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return String(iso || '')
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}${ms ? `.${pad(d.getMilliseconds(), 3)}` : ''}`
}

/** A time of day, with its date unless today. @param {string} iso */
export const when = (iso) => {
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return ''
  const today = new Date().toDateString() === d.toDateString()
  return (today ? '' : `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} `) + clock(iso)
}

/** A value as one line: text as it is, anything else as JSON. @param {unknown} value */
export const json = (value) => (typeof value === 'string' ? value : String(JSON.stringify(value)))

/** @param {string} status @param {string} [extra] */
export const badge = (status, extra) => h('span', { class: `badge ${status}${extra ? ` ${extra}` : ''}`, text: status.replace(/_/g, ' ') })

/**
 * What a request's status means for its kind: a question is answered, not approved; an
 * interrupted exec is retried, completed or aborted (the store keeps approved or denied).
 * @type {Readonly<Record<string, string>>}
 */
const RESOLVED = { answered: 'answered', retry: 'retried', completed: 'completed', abort: 'aborted' }

/** @param {ApprovalView} a */
export const requestBadge = (a) => {
  const resolved = a.resolution === undefined ? undefined : RESOLVED[a.resolution]
  const label = a.status !== 'pending' && resolved !== undefined ? resolved : a.status
  return h('span', { class: `badge ${a.status}`, 'data-testid': 'request-status', text: label })
}

/** A run's usage as the facts line shows it (docs/task-file.md, "Usage and budgets"). @param {RunView['run']['usage']} u */
export const usageText = (u) => {
  const n = (/** @type {number} */ x) => x.toLocaleString('en-US')
  const text = `${n(u.inputTokens + u.outputTokens)} tokens (${n(u.inputTokens)} in, ${n(u.outputTokens)} out)`
  return u.costUsd === undefined ? text : `${text}, $${u.costUsd}`
}

/** The address of a run's view. @param {string} runId */
export const runHref = (runId) => `#/runs/${encodeURIComponent(runId)}`
