// @ts-check
/** What the page holds between renders, and the two things any part of it may ask for again. */

/** @import { MachineLayout } from './chart-layout.js' */
/** @import { MachineGraph } from '../src/inspector/machine-graph.js' */
/** @import { RunListItem, RunView } from '../src/inspector/run-view.js' */

/**
 * @typedef {object} PageState
 * @property {RunListItem[]} runs The runs list, as last fetched.
 * @property {string} status The status filter ('' for all).
 * @property {string} text The goal or id filter.
 * @property {MachineGraph | null} machine
 * @property {MachineLayout | null} layout
 * @property {string | null} runId The run the address names.
 * @property {RunView | null} run Its view, once fetched.
 * @property {string | null} missing A run id the server does not know.
 * @property {number | null} seq The seq looked at (time travel); null follows the latest transition.
 * @property {Record<string, string>} notes What the server said of a decision, by request id.
 * @property {Record<string, string>} errors Why an action failed, by request id or `run:` / `fork:` and the run id.
 * @property {Record<string, boolean>} busy Actions under way, keyed as `errors`.
 * @property {Record<string, string>} editing Arguments being edited as JSON, by request id.
 */

/** @type {PageState} */
export const S = {
  runs: [],
  status: '',
  text: '',
  machine: null,
  layout: null,
  runId: null,
  run: null,
  missing: null,
  seq: null,
  notes: {},
  errors: {},
  busy: {},
  editing: {}
}

/**
 * Re-rendering the run view and fetching the run again: app.js fills these in at start, so the
 * cards (which call them from their buttons) need not import the module that imports them.
 * @type {{ renderDetail: () => void, loadRun: (runId: string) => Promise<void> }}
 */
export const page = { renderDetail: () => {}, loadRun: async () => {} }

/** Actions act on the run as it is now: off while an earlier seq is shown. */
export const pastView = () => S.seq !== null

/** The seq being looked at: the latest while following. @param {RunView} run */
export const viewedSeq = (run) => (S.seq === null ? run.snapshots.length : S.seq)

/** Shows the run as it stood after `seq` (clamped to the run's transitions); the last one follows the run. @param {number} seq */
export const travel = (seq) => {
  if (S.run === null) return
  const last = S.run.snapshots.length
  const to = Math.max(0, Math.min(last, seq))
  S.seq = to === last ? null : to
  page.renderDetail()
}
