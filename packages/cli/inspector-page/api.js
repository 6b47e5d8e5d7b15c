// @ts-check
/**
 * The page's calls to the inspector's API (docs/inspector.md, "API"), each typed with the
 * server's own type of its answer: a change to what the server sends fails the page's type check.
 */

import { byId } from './dom.js'

/** @import { AnswerOutcome } from '../src/inspector/answer-action.js' */
/** @import { ChangedMessage, ErrorBody, InfoView } from '../src/inspector/api-types.js' */
/** @import { DecisionOutcome } from '../src/inspector/approval-action.js' */
/** @import { MachineGraph } from '../src/inspector/machine-graph.js' */
/** @import { ForkView, ResumeOutcome } from '../src/inspector/run-action.js' */
/** @import { RunListItem, RunView } from '../src/inspector/run-view.js' */
/** @import { CancelOutcome } from '@agentvisor/actors' */

/**
 * An answer: its body when the status is 2xx, else the server's `{error}` (null when the body
 * was not JSON).
 * @template T
 * @typedef {{ readonly ok: true, readonly status: number, readonly body: T } | { readonly ok: false, readonly status: number, readonly body: ErrorBody | null }} Reply
 */

/**
 * The server no longer knows this page's cookie (it was restarted, and makes a new token each
 * time, or the cookie was cleared): said once at the top, since nothing on the page can work.
 * @param {string | undefined} message
 */
export const locked = (message) => {
  const banner = byId('locked')
  banner.textContent = message || 'this inspector needs its token: open the URL it printed'
  banner.hidden = false
  const live = byId('live')
  live.dataset['live'] = 'false'
  live.textContent = 'locked'
}

/**
 * @template T
 * @param {string} url
 * @param {RequestInit} [init]
 * @returns {Promise<Reply<T>>}
 */
const request = async (url, init) => {
  const res = await fetch(url, init)
  let body = null
  try {
    body = await res.json()
  } catch {
    body = null
  }
  if (res.status === 401) locked(body?.error)
  return res.ok ? { ok: true, status: res.status, body } : { ok: false, status: res.status, body }
}

/**
 * @template T
 * @param {string} url
 * @param {unknown} body
 * @returns {Promise<Reply<T>>}
 */
const post = (url, body) => request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })

/** @param {string} runId */
const runPath = (runId) => `/api/runs/${encodeURIComponent(runId)}`

/** What went wrong, as the server said it. @param {Reply<unknown>} reply */
export const errorOf = (reply) => (reply.ok ? undefined : reply.body?.error || `HTTP ${reply.status}`)

/** @returns {Promise<Reply<InfoView>>} */
export const fetchInfo = () => request('/api/info')

/** @returns {Promise<Reply<MachineGraph>>} */
export const fetchMachine = () => request('/api/machine')

/** @param {string} status '' for every status. @returns {Promise<Reply<RunListItem[]>>} */
export const fetchRuns = (status) => request(`/api/runs${status ? `?status=${encodeURIComponent(status)}` : ''}`)

/** @param {string} runId @returns {Promise<Reply<RunView>>} */
export const fetchRun = (runId) => request(runPath(runId))

/** @param {string} runId @returns {Promise<Reply<ResumeOutcome>>} */
export const resumeRun = (runId) => post(`${runPath(runId)}/resume`, {})

/** @param {string} runId @returns {Promise<Reply<CancelOutcome>>} */
export const cancelRun = (runId) => post(`${runPath(runId)}/cancel`, {})

/** @param {string} runId @param {number} seq @returns {Promise<Reply<ForkView>>} */
export const forkRun = (runId, seq) => post(`${runPath(runId)}/fork`, { seq })

/**
 * @param {string} runId
 * @param {string} requestId
 * @param {'approve' | 'deny'} decision
 * @param {unknown} [edit] Replacement arguments (approve with edits).
 * @returns {Promise<Reply<DecisionOutcome>>}
 */
export const decideRequest = (runId, requestId, decision, edit) =>
  post(`${runPath(runId)}/approvals/${encodeURIComponent(requestId)}`, edit === undefined ? { decision } : { decision, edit })

/** @param {string} runId @param {string} requestId @param {string} text @returns {Promise<Reply<AnswerOutcome>>} */
export const answerRequest = (runId, requestId, text) => post(`${runPath(runId)}/answers/${encodeURIComponent(requestId)}`, { text })

/**
 * The server's word that runs changed, or undefined for anything else on the stream.
 * @param {string} data
 * @returns {ChangedMessage | undefined}
 */
export const changedOf = (data) => {
  try {
    const msg = JSON.parse(data)
    return msg && msg.type === 'changed' && Array.isArray(msg.runIds) ? msg : undefined
  } catch {
    return undefined
  }
}
