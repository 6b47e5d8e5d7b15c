// @ts-check
/**
 * The inspector page (docs/inspector.md, "The page"): the runs list, the run view with time
 * travel over the persisted snapshots, approvals, and live updates from `GET /api/events`. Every
 * element a test or a person looks for has a `data-testid`.
 */

import { changedOf, fetchInfo, fetchMachine, fetchRun, fetchRuns } from './api.js'
import { layoutMachine } from './chart-layout.js'
import { untangleLabels } from './chart.js'
import { byId, byIdAs, h } from './dom.js'
import { badge, runHref, short, when } from './format.js'
import { approvalsCard } from './requests.js'
import { chartCard, head, policyCard, stepsCard, timelineCard, treeCard } from './run-cards.js'
import { page, S, travel, viewedSeq } from './state.js'
import { asOf } from './time-travel.js'

/** @import { RunListItem, RunTreeNode } from '../src/inspector/run-view.js' */

// ---- runs list --------------------------------------------------------------------------

/**
 * The runs as trees: each root newest first, its children under it in spawn order (the server
 * sends them so), depth-first. A run whose parent is not listed (filtered out) heads its own group.
 * @param {ReadonlyArray<RunListItem>} runs
 */
const grouped = (runs) => {
  const listed = new Set(runs.map((r) => r.id))
  /** @type {Map<string, RunListItem[]>} */
  const kids = new Map()
  /** @type {RunListItem[]} */
  const roots = []
  /** @type {Array<{ run: RunListItem, depth: number }>} */
  const out = []
  for (const r of runs) {
    if (r.parentId && listed.has(r.parentId)) {
      const siblings = kids.get(r.parentId) ?? []
      siblings.push(r)
      kids.set(r.parentId, siblings)
    } else roots.push(r)
  }
  /** @param {RunListItem} r @param {number} depth */
  const add = (r, depth) => {
    out.push({ run: r, depth })
    for (const c of kids.get(r.id) ?? []) add(c, Math.min(depth + 1, 4))
  }
  for (const r of roots.slice().reverse()) add(r, 0)
  return out
}

const renderRuns = () => {
  const text = S.text.trim().toLowerCase()
  const shown = grouped(S.runs).filter(({ run }) => !text || run.goal.toLowerCase().includes(text) || run.id.startsWith(text))
  const list = byId('runs-list')
  list.replaceChildren(
    ...shown.map(({ run, depth }) =>
      h(
        'li',
        {
          'data-testid': 'run-row',
          'data-run-id': run.id,
          'data-status': run.status,
          'data-depth': depth,
          class: (run.id === S.runId ? 'selected' : '') + (depth > 0 ? ` child depth-${depth}` : '')
        },
        [
          h('a', { href: runHref(run.id) }, [
            badge(run.status),
            run.interrupted ? [' ', badge('interrupted')] : null,
            h('span', { class: 'goal', text: run.goal }),
            h('span', {
              class: 'meta',
              text: `${short(run.id)}  ${run.state}  ${when(run.updatedAt)}${run.parentId ? `  child of ${short(run.parentId)}` : ''}`
            })
          ])
        ]
      )
    )
  )
  byId('count').textContent = `${shown.length}${shown.length === 1 ? ' run' : ' runs'}${S.status || text ? ' (filtered)' : ''}`
  if (shown.length === 0) list.appendChild(h('li', { class: 'empty', text: S.runs.length ? 'no run matches' : 'no runs yet' }))
}

const loadRuns = async () => {
  const wanted = S.status
  const reply = await fetchRuns(wanted)
  if (!reply.ok || wanted !== S.status) return
  S.runs = reply.body
  renderRuns()
}

// ---- one run ----------------------------------------------------------------------------

const renderDetail = () => {
  const root = byId('detail')
  const scrollTop = root.querySelector('.timeline-scroll')?.scrollTop ?? 0
  if (S.missing) {
    root.replaceChildren(h('div', { class: 'empty', 'data-testid': 'run-missing', text: `No run with id ${S.missing}` }))
    return
  }
  if (!S.run) {
    root.replaceChildren(h('div', { class: 'empty', text: S.runId ? 'Loading...' : 'Select a run on the left.' }))
    return
  }
  const run = S.run
  const then = asOf(run, S.seq)
  root.replaceChildren(
    h('div', { 'data-testid': 'run-view', 'data-run-id': run.run.id, 'data-as-of': S.seq === null ? 'latest' : String(S.seq) }, [
      head(run),
      chartCard(run),
      h('div', { class: 'grid2' }, [timelineCard(run), h('div', {}, [approvalsCard(then), treeCard(then)])]),
      stepsCard(then),
      policyCard(then)
    ])
  )
  const chart = root.querySelector('svg.chart')
  if (chart instanceof SVGSVGElement) untangleLabels(chart)
  const scroller = root.querySelector('.timeline-scroll')
  if (scroller) scroller.scrollTop = S.seq === null ? scroller.scrollHeight : scrollTop
}

/** @param {string} id */
const loadRun = async (id) => {
  const reply = await fetchRun(id)
  if (id !== S.runId) return
  if (reply.status === 404) {
    S.run = null
    S.missing = id
    renderDetail()
    return
  }
  if (!reply.ok) return
  S.run = reply.body
  S.missing = null
  if (S.seq !== null && S.seq > S.run.snapshots.length) S.seq = null
  renderDetail()
  renderRuns()
}

// ---- routing, live updates --------------------------------------------------------------

const route = () => {
  const m = /^#\/runs\/([^/]+)/.exec(location.hash)
  const id = m?.[1] === undefined ? null : decodeURIComponent(m[1])
  if (id !== S.runId) {
    S.runId = id
    S.run = null
    S.missing = null
    S.seq = null
    S.notes = {}
    S.errors = {}
  }
  renderDetail()
  renderRuns()
  if (id) void loadRun(id)
}

/** @type {ReturnType<typeof setTimeout> | null} */
let pending = null
/** @type {Set<string>} */
let pendingIds = new Set()

/** Runs changed: after a short pause that gathers a burst, the list again, and the run shown if it is of its tree. @param {ReadonlyArray<string>} runIds */
const changed = (runIds) => {
  for (const id of runIds) pendingIds.add(id)
  if (pending) return
  pending = setTimeout(() => {
    const ids = pendingIds
    pending = null
    pendingIds = new Set()
    void loadRuns()
    if (!S.runId) return
    const family = S.run ? [] : [S.runId]
    /** @param {RunTreeNode | undefined} n */
    const walk = (n) => {
      if (!n) return
      family.push(n.id)
      n.children.forEach(walk)
    }
    walk(S.run?.tree)
    if (family.some((id) => ids.has(id))) void loadRun(S.runId)
  }, 60)
}

const connect = () => {
  const live = byId('live')
  const events = new EventSource('/api/events')
  events.onopen = () => {
    live.dataset['live'] = 'true'
    live.textContent = 'live'
    void loadRuns()
    if (S.runId) void loadRun(S.runId)
  }
  events.onerror = () => {
    live.dataset['live'] = 'false'
    live.textContent = 'reconnecting...'
    // Refused (a 401 closes the stream for good): ask the API why, which shows the banner.
    if (events.readyState === EventSource.CLOSED) void fetchInfo()
  }
  events.onmessage = (m) => {
    const msg = changedOf(m.data)
    if (msg) changed(msg.runIds)
  }
}

const start = async () => {
  page.renderDetail = renderDetail
  page.loadRun = loadRun
  // The token was for the first load only (it set the cookie): off the address bar and the history.
  if (/[?&]token=/.test(location.search)) history.replaceState(null, '', location.pathname + location.hash)
  const select = byIdAs('status-filter', HTMLSelectElement)
  select.addEventListener('change', () => {
    S.status = select.value
    void loadRuns()
  })
  const search = byIdAs('search', HTMLInputElement)
  search.addEventListener('input', () => {
    S.text = search.value
    renderRuns()
  })
  document.addEventListener('keydown', (e) => {
    if (!S.run || /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement?.tagName ?? '')) return
    if (e.key === 'ArrowLeft') {
      travel(viewedSeq(S.run) - 1)
      e.preventDefault()
    }
    if (e.key === 'ArrowRight') {
      travel(viewedSeq(S.run) + 1)
      e.preventDefault()
    }
  })
  window.addEventListener('hashchange', route)
  const info = await fetchInfo()
  if (info.ok) byId('db').textContent = info.body.db
  const machine = await fetchMachine()
  if (machine.ok) {
    S.machine = machine.body
    S.layout = layoutMachine(machine.body)
  }
  route()
  await loadRuns()
  connect()
}

void start()
