import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs'
import * as path from 'node:path'
import { Agentvisor } from '@agentvisor/actors'
import type { Provider } from '@agentvisor/core'
import { getRun, listApprovals, listRuns, listTransitions, openStore } from '@agentvisor/store'
import { Effect } from 'effect'
import type { Browser, Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { inspectCommand } from '../packages/cli/src/commands/inspect.js'
import { type Inspector, startInspector } from '../packages/cli/src/inspector/server.js'
import { startMockLlm } from '@agentvisor/cli'
import { launchChromium } from './support/chromium.js'
import { inspectorFetch, inspectorPost } from './support/inspector.js'
import { lastJson, runCli, startRunInBackground, tempDir, waitFor, writeTask } from './support/cli.js'
import { runCall } from './support/run-call.js'

const ARTIFACTS = path.join(import.meta.dirname, '..', 'test-artifacts')
// `npm run screenshots` sets this: the pictures in docs/inspector.md are made by these tests.
const DOCS_IMAGES = process.env['AGENTVISOR_DOCS_SCREENSHOTS'] === '1' ? path.join(import.meta.dirname, '..', 'docs', 'images') : undefined

/** A screenshot of the page into test-artifacts/ (and docs/images/ for `npm run screenshots`). */
const screenshot = async (page: Page, name: string): Promise<void> => {
  await page.screenshot({ path: path.join(ARTIFACTS, name) })
  if (DOCS_IMAGES !== undefined) {
    mkdirSync(DOCS_IMAGES, { recursive: true })
    await page.screenshot({ path: path.join(DOCS_IMAGES, name) })
  }
}

const write = (p: string, content = 'DONE') => ({ name: 'write_file', arguments: { path: p, content } })

/** A task file for the real CLI: a scripted model that writes out.txt, verified. */
const scriptedTask = (dir: string, options: { goal: string; allowWrite: boolean }) =>
  writeTask(dir, {
    goal: options.goal,
    workspace: 'ws',
    providers: [{ name: 'primary', kind: 'scripted', steps: [{ toolCalls: [write('out.txt')] }] }],
    verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
    policy: { layers: [{ name: 'team', ...(options.allowWrite ? { allow: { write: ['out.txt'] } } : {}), deny: { write: ['secrets/**'] } }] },
    approval: 'defer'
  })

/** Runs a task with the built CLI and returns its run id, checking the exit code. */
const cliRun = async (file: string, db: string, expectedCode: number): Promise<string> => {
  const result = await runCli(['run', file, '--json', '--db', db])
  expect(result.code, result.stderr).toBe(expectedCode)
  return lastJson<{ runId: string }>(result).runId
}

const post = (path: string, body: string, contentType = 'application/json') => inspectorPost(inspector!, path, body, { 'content-type': contentType })
const get = (path: string, init?: RequestInit) => inspectorFetch(inspector!, path, init)

let inspector: Inspector | undefined
afterEach(async () => {
  await inspector?.close()
  inspector = undefined
})

describe('the inspector API', () => {
  it('answers an unknown run id with 404 and a JSON error, and keeps serving', async () => {
    const dir = tempDir()
    inspector = await startInspector({ db: path.join(dir, 'av.db'), port: 0 })
    const missing = await get('/api/runs/no-such-run')
    expect(missing.status).toBe(404)
    expect(missing.headers.get('content-type')).toContain('application/json')
    expect(await missing.json()).toEqual({ error: 'no run with id no-such-run' })
    const approval = await post('/api/runs/no-such-run/approvals/r1', '{"decision":"approve"}')
    expect(approval.status).toBe(404)
    expect(await (await get('/api/runs?status=lost')).json()).toEqual({ error: expect.stringContaining('status must be one of') })
    expect((await get('/api/runs')).status).toBe(200)
  })

  it('refuses a malformed approval body with 400 and leaves the request pending', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const runId = await cliRun(scriptedTask(dir, { goal: 'Write DONE into out.txt', allowWrite: false }), db, 3)
    inspector = await startInspector({ db, port: 0 })
    const view = (await (await get(`/api/runs/${runId}`)).json()) as { approvals: Array<{ id: string; status: string }> }
    const requestId = view.approvals[0]!.id
    const url = `/api/runs/${runId}/approvals/${requestId}`

    for (const body of ['{not json', '[]', '{"decision":"maybe"}', '{"decision":"approve","remember":"yes"}']) {
      const res = await post(url, body)
      expect(res.status, body).toBe(400)
      expect(await res.json(), body).toEqual({ error: expect.any(String) })
    }
    expect((await post(url, 'decision=approve', 'application/x-www-form-urlencoded')).status).toBe(415)
    expect((await inspectorPost(inspector, url, '{"decision":"approve"}', { origin: 'http://evil.example' })).status).toBe(403)
    expect((await get(url)).status).toBe(405)

    const store = await openStore(db)
    try {
      expect((await runCall(listApprovals(store.db, runId))).map((a) => a.status)).toEqual(['pending'])
      expect((await runCall(getRun(store.db, runId)))?.status).toBe('awaiting_approval')
    } finally {
      await store.close()
    }
  })

  it('derives the chart from the run machine itself, with every state and the root-level events', async () => {
    inspector = await startInspector({ db: path.join(tempDir(), 'av.db'), port: 0 })
    const graph = (await (await get('/api/machine')).json()) as {
      initial: string
      nodes: Array<{ id: string; children: string[] }>
      edges: Array<{ from: string; event: string; to: string; guard?: string }>
    }
    expect(graph.initial).toBe('dispatching')
    expect(graph.nodes.map((n) => n.id)).toEqual(
      expect.arrayContaining([
        'dispatching',
        'retrying',
        'fallingOver',
        'awaitingApproval',
        'acting',
        'awaitingChildren',
        'verifying',
        'finished',
        'finished.succeeded',
        'finished.timedOut'
      ])
    )
    expect(graph.nodes.find((n) => n.id === 'finished')?.children).toEqual([
      'finished.succeeded',
      'finished.stepCapReached',
      'finished.failed',
      'finished.cancelled',
      'finished.timedOut'
    ])
    expect(graph.edges).toEqual(
      expect.arrayContaining([
        { from: 'verifying', event: 'VERIFY_PASSED', to: 'finished.succeeded' },
        { from: 'dispatching', event: 'PROVIDER_ERROR', to: 'fallingOver', guard: 'isTransient and hasNextProvider' },
        { from: 'dispatching', event: 'DISPATCH_LOST', to: 'dispatching', reenter: true },
        { from: '*', event: 'CANCEL', to: 'finished.cancelled', guard: 'isActive' }
      ])
    )
  })

  it('pushes a change event when a request is decided from another process', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const runId = await cliRun(scriptedTask(dir, { goal: 'Write DONE into out.txt', allowWrite: false }), db, 3)
    inspector = await startInspector({ db, port: 0, pollMs: 50 })
    const controller = new AbortController()
    const events = await get('/api/events', { signal: controller.signal })
    expect(events.headers.get('content-type')).toContain('text/event-stream')
    const reader = events.body!.getReader()
    let received = ''
    const changed = (async () => {
      for (;;) {
        const { value, done } = await reader.read()
        if (done) return undefined
        received += Buffer.from(value).toString('utf8')
        const line = received.split('\n').find((l) => l.startsWith('data: ') && l.includes(runId))
        if (line !== undefined) return JSON.parse(line.slice('data: '.length)) as unknown
      }
    })()
    // Let the feed take its first look before the decision lands.
    await waitFor(() => (received.includes(': connected') ? true : undefined), 'the event stream to open')
    const approve = await runCli(['approve', runId, '--db', db])
    expect(approve.code, approve.stderr).toBe(0)
    expect(await changed).toEqual({ type: 'changed', runIds: [runId] })
    controller.abort()
  })
})

describe('the inspector page in headless Chromium', () => {
  let browser: Browser
  beforeAll(async () => {
    browser = await launchChromium()
    mkdirSync(ARTIFACTS, { recursive: true })
  })
  afterAll(async () => {
    await browser?.close()
  })

  /** Opens the page; `errors` collects uncaught errors of its script (each test expects none). */
  const openPage = async (url: string): Promise<{ page: Page; errors: string[] }> => {
    const page = await browser.newPage({ viewport: { width: 1440, height: 1300 } })
    const errors: string[] = []
    page.on('pageerror', (error) => errors.push(error.message))
    await page.goto(url)
    return { page, errors }
  }
  const litState = (page: Page) => page.locator('[data-testid=chart] .state-node.current')

  it('lists a finished run, lights its final state, and steps back through its timeline', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const runId = await cliRun(scriptedTask(dir, { goal: 'Write DONE into out.txt', allowWrite: true }), db, 0)
    inspector = await startInspector({ db, port: 0 })
    const { page, errors } = await openPage(inspector.url)

    const row = page.locator(`[data-testid=run-row][data-run-id="${runId}"]`)
    await expect.poll(() => row.getAttribute('data-status')).toBe('succeeded')
    await row.locator('a').click()
    await page.locator(`[data-testid=run-view][data-run-id="${runId}"]`).waitFor()
    await expect.poll(() => litState(page).getAttribute('data-state')).toBe('finished.succeeded')
    expect(await page.locator('[data-testid=run-status]').getAttribute('data-status')).toBe('succeeded')
    expect(await page.locator('[data-testid=timeline-row]').evaluateAll((rows) => rows.map((r) => r.textContent))).toEqual([
      expect.stringMatching(/^0start\s*dispatching/),
      expect.stringMatching(/^1PROVIDER_OKdispatchingacting/),
      expect.stringMatching(/^2TOOLS_DONEactingverifying/),
      expect.stringMatching(/^3VERIFY_PASSEDverifyingfinished\.succeeded/)
    ])
    await screenshot(page, 'inspector-run.png')

    await page.getByTestId('step-back').click()
    await expect.poll(() => litState(page).getAttribute('data-state')).toBe('verifying')
    expect(await page.getByTestId('viewing-seq').getAttribute('data-seq')).toBe('2')
    expect(await page.locator('[data-testid=chart] .edge.taken').first().getAttribute('data-from')).toBe('acting')
    await page.getByTestId('step-back').click()
    await expect.poll(() => litState(page).getAttribute('data-state')).toBe('acting')
    await page.locator('[data-testid=timeline-row][data-seq="0"]').click()
    await expect.poll(() => litState(page).getAttribute('data-state')).toBe('dispatching')
    expect(await page.getByTestId('step-back').isDisabled()).toBe(true)
    await page.getByTestId('step-forward').click()
    await expect.poll(() => litState(page).getAttribute('data-state')).toBe('acting')
    await screenshot(page, 'inspector-time-travel.png')
    await page.getByTestId('step-latest').click()
    await expect.poll(() => litState(page).getAttribute('data-state')).toBe('finished.succeeded')
    expect(await page.getByTestId('viewing-seq').getAttribute('data-latest')).toBe('true')
    await page.close()
    expect(errors).toEqual([])
  })

  it("shows a run's typed output and where each of its tools comes from", async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const file = writeTask(dir, {
      goal: 'Look the ticket up',
      workspace: 'ws',
      providers: [
        {
          name: 'primary',
          kind: 'scripted',
          steps: [
            { toolCalls: [{ name: 'lookup_ticket', arguments: { id: 'T-42' } }] },
            { toolCalls: [{ name: 'final_answer', arguments: { title: 'Login fails' } }] }
          ]
        }
      ],
      tools: ['lookup_ticket'],
      toolModules: [path.join(import.meta.dirname, 'fixtures', 'tools', 'ticket-tools.mjs')],
      output: { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] },
      approval: 'defer'
    })
    const runId = await cliRun(file, db, 0)
    inspector = await startInspector({ db, port: 0 })
    const { page, errors } = await openPage(`${inspector.url}#/runs/${runId}`)
    await page.locator(`[data-testid=run-view][data-run-id="${runId}"]`).waitFor()
    expect(await page.getByTestId('run-output').textContent()).toBe('output {"title":"Login fails"}')
    expect(await page.getByTestId('tool-origin').allTextContents()).toEqual([' module, read '])
    await screenshot(page, 'inspector-output.png')
    await page.close()
    expect(errors).toEqual([])
  })

  it('approving a pending request from the page lets the paused run finish, shown without a reload', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const runId = await cliRun(scriptedTask(dir, { goal: 'Write DONE into out.txt once approved', allowWrite: false }), db, 3)
    expect(existsSync(path.join(dir, 'ws', 'out.txt'))).toBe(false)
    inspector = await startInspector({ db, port: 0 })
    const { page, errors } = await openPage(`${inspector.url}#/runs/${runId}`)
    await expect.poll(() => litState(page).getAttribute('data-state')).toBe('awaitingApproval')
    const request = page.locator('[data-testid=approval-row]')
    expect(await request.getAttribute('data-status')).toBe('pending')
    expect(await request.textContent()).toContain('write out.txt')
    await page.evaluate(() => Object.assign(globalThis, { notReloaded: true }))

    await request.getByTestId('approve').click()
    await expect.poll(() => page.getByTestId('run-status').getAttribute('data-status'), { timeout: 60_000 }).toBe('succeeded')
    await expect.poll(() => litState(page).getAttribute('data-state')).toBe('finished.succeeded')
    expect(await page.locator('[data-testid=approval-row]').getAttribute('data-status')).toBe('approved')
    expect(await page.evaluate(() => (globalThis as { notReloaded?: boolean }).notReloaded)).toBe(true)
    await screenshot(page, 'inspector-approved.png')
    await page.close()
    expect(errors).toEqual([])

    expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('DONE')
    const store = await openStore(db)
    try {
      expect((await runCall(getRun(store.db, runId)))?.status).toBe('succeeded')
      expect(await runCall(listApprovals(store.db, runId))).toEqual([expect.objectContaining({ status: 'approved', source: 'inspector' })])
      expect((await runCall(listTransitions(store.db, runId))).map((t) => t.event)).toEqual([
        'PROVIDER_OK',
        'APPROVAL_REQUESTED',
        'APPROVALS_DECIDED',
        'TOOLS_DONE',
        'VERIFY_PASSED'
      ])
    } finally {
      await store.close()
    }
  })

  it('approves with edited arguments, turns actions off while an earlier seq is shown, cancels a paused run and resumes one decided elsewhere', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    // Every write asks: the model writes draft.txt, the verify wants out.txt.
    const asking = (goal: string, file: string) =>
      writeTask(
        dir,
        {
          goal,
          workspace: `ws-${file}`,
          // Two steps: a run resumed after its write plays the second (one per dispatch of the run), which asks again.
          providers: [{ name: 'primary', kind: 'scripted', steps: [{ toolCalls: [write(file)] }, { toolCalls: [write(file)] }] }],
          verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
          policy: { layers: [{ name: 'team', ask: { write: ['**'] } }] },
          approval: 'defer'
        },
        `${file}.json`
      )
    const edited = await cliRun(asking('Write DONE, edited on the way', 'draft.txt'), db, 3)
    const cancelled = await cliRun(asking('Write DONE, then be cancelled', 'out.txt'), db, 3)
    const resumed = await cliRun(asking('Write DONE once resumed', 'late.txt'), db, 3)
    inspector = await startInspector({ db, port: 0 })

    // Approve with edits: the call writes out.txt instead of draft.txt.
    const { page, errors } = await openPage(`${inspector.url}#/runs/${edited}`)
    const request = page.locator('[data-testid=approval-row]')
    await request.getByTestId('approve').waitFor()
    // While an earlier seq is shown, nothing can be decided or done.
    await page.getByTestId('step-back').click()
    await page.getByTestId('actions-off').waitFor()
    // As of seq 1 the request was not made yet; the run's actions are off.
    expect(await request.count()).toBe(0)
    expect(await page.getByTestId('run-cancel').isDisabled()).toBe(true)
    await page.getByTestId('step-latest').click()
    expect(await request.getByTestId('approve').isDisabled()).toBe(false)
    await request.getByTestId('edit').click()
    expect(JSON.parse(await page.getByTestId('edit-arguments').inputValue())).toEqual({ path: 'draft.txt', content: 'DONE' })
    await page.getByTestId('edit-arguments').fill('{"path": "out.txt", "content": "DONE"}')
    await screenshot(page, 'inspector-edit.png')
    await page.getByTestId('approve-edited').click()
    await expect.poll(() => page.getByTestId('run-status').getAttribute('data-status'), { timeout: 60_000 }).toBe('succeeded')
    expect(readFileSync(path.join(dir, 'ws-draft.txt', 'out.txt'), 'utf8')).toBe('DONE')
    expect(existsSync(path.join(dir, 'ws-draft.txt', 'draft.txt'))).toBe(false)

    // Cancel a paused run from the page.
    await page.goto(`${inspector.url}#/runs/${cancelled}`)
    await page.getByTestId('run-cancel').click()
    await expect.poll(() => page.getByTestId('run-status').getAttribute('data-status'), { timeout: 60_000 }).toBe('cancelled')
    expect(await page.getByTestId('run-cancel').isDisabled()).toBe(true)

    // A run whose request was decided on the command line, not resumed: Resume drives it on here.
    expect((await runCli(['approve', resumed, '--db', db])).code).toBe(0)
    await page.goto(`${inspector.url}#/runs/${resumed}`)
    await expect.poll(() => page.getByTestId('run-resume').isDisabled()).toBe(false)
    await page.getByTestId('run-resume').click()
    // It performs the approved write, fails its verify, and asks again at its next step.
    await expect.poll(() => page.locator('[data-testid=approval-row]').count(), { timeout: 60_000 }).toBe(2)
    expect(await page.getByTestId('run-status').getAttribute('data-status')).toBe('awaiting_approval')
    await page.close()
    expect(errors).toEqual([])

    const store = await openStore(db)
    try {
      expect(await runCall(listApprovals(store.db, edited))).toEqual([
        expect.objectContaining({
          status: 'approved',
          source: 'inspector',
          edited_payload: expect.objectContaining({ arguments: expect.stringContaining('out.txt') })
        })
      ])
      expect((await runCall(getRun(store.db, cancelled)))?.status).toBe('cancelled')
      expect(existsSync(path.join(dir, 'ws-out.txt', 'out.txt'))).toBe(false)
      // It wrote late.txt as approved on the command line, driven by the inspector.
      expect(readFileSync(path.join(dir, 'ws-late.txt', 'late.txt'), 'utf8')).toBe('DONE')
      expect((await runCall(listTransitions(store.db, resumed))).map((t) => t.event)).toEqual(
        expect.arrayContaining(['APPROVALS_DECIDED', 'TOOLS_DONE', 'VERIFY_FAILED', 'APPROVAL_REQUESTED'])
      )
    } finally {
      await store.close()
    }
  })

  it('marks a run whose driver was killed interrupted on an open page, without a reload', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const file = writeTask(dir, {
      goal: 'Think for a long time',
      workspace: 'ws',
      providers: [{ name: 'primary', kind: 'scripted', steps: [{ delayMs: 60_000, text: 'never seen' }] }],
      approval: 'auto'
    })
    const run = startRunInBackground(file, db)
    const runId = await run.runId()
    inspector = await startInspector({ db, port: 0, pollMs: 100 })
    const { page, errors } = await openPage(`${inspector.url}#/runs/${runId}`)
    await expect.poll(() => page.getByTestId('run-status').getAttribute('data-status')).toBe('running')
    expect(await page.locator('.run-head .badge.interrupted').count()).toBe(0)

    process.kill(run.pid(), 'SIGKILL')
    await run.done
    // Its driver wrote nothing more: the page learns it from the lease the dead process left.
    await expect.poll(() => page.locator('.run-head .badge.interrupted').count(), { timeout: 60_000 }).toBe(1)
    await expect.poll(() => page.locator(`[data-testid=run-row][data-run-id="${runId}"] .badge.interrupted`).count()).toBe(1)
    expect(await page.getByTestId('run-resume').isDisabled()).toBe(false)
    await page.close()
    expect(errors).toEqual([])
  })

  it('works from 800 px wide: nothing overflows the page, and the chart scrolls in its own card', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const runId = await cliRun(scriptedTask(dir, { goal: 'Write DONE into out.txt at 800 px', allowWrite: true }), db, 0)
    inspector = await startInspector({ db, port: 0 })
    const page = await browser.newPage({ viewport: { width: 800, height: 900 } })
    const errors: string[] = []
    page.on('pageerror', (error) => errors.push(error.message))
    await page.goto(`${inspector.url}#/runs/${runId}`)
    await expect.poll(() => litState(page).getAttribute('data-state')).toBe('finished.succeeded')
    // Measured in the page (its DOM types are not the tests' own).
    const widths = (await page.evaluate(`(() => {
      const detail = document.querySelector('main.detail')
      const chart = document.querySelector('.chart-wrap')
      return { page: document.documentElement.scrollWidth, detail: detail.scrollWidth - detail.clientWidth, chart: chart.scrollWidth - chart.clientWidth }
    })()`)) as { page: number; detail: number; chart: number }
    expect(widths.page).toBeLessThanOrEqual(800)
    expect(widths.detail).toBe(0)
    expect(widths.chart).toBeGreaterThan(0)
    await screenshot(page, 'inspector-800px.png')
    await page.close()
    expect(errors).toEqual([])
  })

  it('at 1400 px: no chart label overlaps another or a state, a pending call shows its arguments before Edit, and an answered question reads answered, inside its card', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const longPath = `reports/${'quarterly-export-'.repeat(6)}final.txt`
    const pendingId = await cliRun(
      writeTask(
        dir,
        {
          goal: 'Write the long report, once approved',
          workspace: 'ws-long',
          providers: [{ name: 'primary', kind: 'scripted', steps: [{ toolCalls: [write(longPath)] }] }],
          policy: { layers: [{ name: 'team', ask: { write: ['**'] } }] },
          approval: 'defer'
        },
        'long.json'
      ),
      db,
      3
    )
    const question = 'Which bucket should the export go to?'
    const answer = `s3://${'companyexportsstaging'.repeat(4)}/bucket`
    const mock = await startMockLlm({
      scenarios: {
        models: { m: [{ toolCalls: [{ name: 'ask_human', arguments: { question } }] }, { toolCalls: [write('out.txt')] }, { text: 'done' }] }
      } as never,
      port: 0
    })
    try {
      const askingId = await cliRun(
        writeTask(
          dir,
          {
            goal: 'Ask where the export goes',
            workspace: 'ws-ask',
            providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
            tools: ['ask_human', 'write_file'],
            verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
            policy: { layers: [{ name: 'team', allow: { write: ['out.txt'] } }] },
            approval: 'defer'
          },
          'ask.json'
        ),
        db,
        3
      )
      inspector = await startInspector({ db, port: 0 })
      const page = await browser.newPage({ viewport: { width: 1400, height: 1300 } })
      const errors: string[] = []
      page.on('pageerror', (error) => errors.push(error.message))

      // The pending call's arguments, as JSON, without a click on Edit.
      await page.goto(`${inspector.url}#/runs/${pendingId}`)
      const shown = page.locator('[data-testid=approval-row] [data-testid=approval-arguments]')
      await shown.waitFor()
      expect(await shown.isVisible()).toBe(true)
      expect(JSON.parse((await shown.textContent())!)).toEqual({ path: longPath, content: 'DONE' })
      // Measured in the page (its DOM types are not the tests' own).
      const measure = `(() => {
        const box = (e) => { const r = e.getBoundingClientRect(); return { x0: r.left, y0: r.top, x1: r.right, y1: r.bottom } }
        const hit = (a, b) => a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1
        const labels = Array.from(document.querySelectorAll('[data-testid=chart] .edge-label text')).map((e) => ({ text: e.textContent, ...box(e) }))
        const states = Array.from(document.querySelectorAll('[data-testid=chart] .state-node rect')).map(box)
        const overlaps = []
        labels.forEach((a, i) => {
          labels.slice(i + 1).forEach((b) => { if (hit(a, b)) overlaps.push(a.text + ' / ' + b.text) })
          if (states.some((s) => hit(a, s))) overlaps.push(a.text + ' / a state')
        })
        const table = document.querySelector('[data-testid=approvals]')
        const card = box(table.closest('.card'))
        const cells = Array.from(table.querySelectorAll('td')).map((td) => ({ text: td.textContent, overflow: td.scrollWidth - td.clientWidth, inside: ((b) => b.x0 >= card.x0 && b.x1 <= card.x1)(box(td)) }))
        return { labels: labels.length, overlaps, tableOverflow: table.scrollWidth - table.closest('.card').clientWidth, outside: cells.filter((c) => c.overflow > 0 || !c.inside).map((c) => c.text) }
      })()`
      type Measured = { labels: number; overlaps: string[]; tableOverflow: number; outside: string[] }
      const pendingView = (await page.evaluate(measure)) as Measured
      expect(pendingView.labels).toBeGreaterThan(15)
      expect(pendingView.overlaps).toEqual([])
      expect(pendingView.outside).toEqual([])

      // A question answered on the page: labelled answered, its column inside the card.
      await page.goto(`${inspector.url}#/runs/${askingId}`)
      // Once live: the stream's first load re-renders the run view (and would empty a field typed into before).
      await expect.poll(() => page.getByTestId('live-status').getAttribute('data-live')).toBe('true')
      await page.locator(`[data-testid=run-view][data-run-id="${askingId}"]`).waitFor()
      const row = page.locator('[data-testid=approval-row]')
      await row.getByTestId('answer-text').fill(answer)
      await row.getByTestId('answer').click()
      await expect.poll(() => page.getByTestId('run-status').getAttribute('data-status'), { timeout: 40_000 }).toBe('succeeded')
      expect(await row.getByTestId('request-status').textContent()).toBe('answered')
      expect(await row.textContent()).toContain('answered by inspector')
      const answeredView = (await page.evaluate(measure)) as Measured
      expect(answeredView.overlaps).toEqual([])
      expect(answeredView.tableOverflow).toBeLessThanOrEqual(0)
      expect(answeredView.outside).toEqual([])
      await screenshot(page, 'inspector-question.png')
      await page.close()
      expect(errors).toEqual([])
      const store = await openStore(db)
      try {
        expect(await runCall(listApprovals(store.db, askingId))).toEqual([
          expect.objectContaining({ status: 'approved', account: answer, source: 'inspector' })
        ])
      } finally {
        await store.close()
      }
    } finally {
      await mock.close()
    }
  }, 60_000)

  it('time travel shows the whole run as it stood: steps, results, attempts and requests as of the seq shown', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const runId = await cliRun(scriptedTask(dir, { goal: 'Write DONE into out.txt, approved later', allowWrite: false }), db, 3)
    expect((await runCli(['approve', runId, '--db', db])).code).toBe(0)
    expect((await runCli(['resume', runId, '--db', db])).code).toBe(0)
    inspector = await startInspector({ db, port: 0 })
    const { page, errors } = await openPage(`${inspector.url}#/runs/${runId}`)
    await expect.poll(() => litState(page).getAttribute('data-state')).toBe('finished.succeeded')
    const at = async (seq: number) => {
      await page.locator(`[data-testid=timeline-row][data-seq="${seq}"]`).click()
      await page.locator(`[data-testid=run-view][data-as-of="${seq}"]`).waitFor()
      const steps = await page.locator('[data-testid=step]').count()
      const results = await page.locator('[data-testid=step] .result').count()
      const requests = await page.locator('[data-testid=approval-row]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-status')))
      return { steps, results, requests }
    }
    // 1 PROVIDER_OK, 2 APPROVAL_REQUESTED, 3 APPROVALS_DECIDED, 4 TOOLS_DONE, 5 VERIFY_PASSED
    expect(await at(1)).toEqual({ steps: 1, results: 0, requests: [] })
    expect(await at(2)).toEqual({ steps: 1, results: 0, requests: ['pending'] })
    expect(await at(3)).toEqual({ steps: 1, results: 0, requests: ['approved'] })
    expect(await at(4)).toEqual({ steps: 1, results: 1, requests: ['approved'] })
    await page.locator('[data-testid=timeline-row][data-seq="0"]').click()
    await page.locator('[data-testid=run-view][data-as-of="0"]').waitFor()
    expect(await page.locator('[data-testid=step]').count()).toBe(0)
    await page.getByTestId('step-latest').click()
    await page.locator('[data-testid=run-view][data-as-of="latest"]').waitFor()
    expect(await page.locator('[data-testid=step] .result').count()).toBe(1)
    await page.close()
    expect(errors).toEqual([])
  })

  it('forks a 4-step run from the seq shown: the fork runs on from step 2, is shown linked both ways, and the original stays as it was', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const step = (file: string) => ({ toolCalls: [{ name: 'write_file', arguments: { path: file, content: file } }] })
    const mock = await startMockLlm({ scenarios: { replay: 'turn', models: { m: ['a.txt', 'b.txt', 'c.txt', 'd.txt'].map(step) } } as never, port: 0 })
    try {
      const task = writeTask(dir, {
        goal: 'Write four files',
        workspace: 'ws',
        providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
        verify: { fileContains: { path: 'd.txt', text: 'd.txt' } },
        approval: 'auto'
      })
      const runId = await cliRun(task, db, 0)
      const store = await openStore(db)
      const before = await runCall(listTransitions(store.db, runId)).finally(() => store.close())
      expect(before).toHaveLength(12)
      for (const file of ['c.txt', 'd.txt']) rmSync(path.join(dir, 'ws', file))
      inspector = await startInspector({ db, port: 0 })
      const { page, errors } = await openPage(`${inspector.url}#/runs/${runId}`)
      await expect.poll(() => litState(page).getAttribute('data-state')).toBe('finished.succeeded')
      // At the end the run cannot be forked; at seq 6 (step 2 done) it can.
      expect(await page.getByTestId('fork-here').isDisabled()).toBe(true)
      await page.locator('[data-testid=timeline-row][data-seq="6"]').click()
      await page.locator('[data-testid=run-view][data-as-of="6"]').waitFor()
      await page.getByTestId('fork-here').click()
      await page.locator(`[data-testid=run-view]:not([data-run-id="${runId}"])`).waitFor()
      const forkId = (await page.getByTestId('run-view').getAttribute('data-run-id'))!
      await expect.poll(() => page.getByTestId('run-status').getAttribute('data-status'), { timeout: 60_000 }).toBe('succeeded')
      expect(await page.getByTestId('forked-from').textContent()).toBe(`forked from ${runId.slice(0, 8)} at seq 6`)
      await screenshot(page, 'inspector-fork.png')
      await page.getByTestId('forked-from').locator('a').click()
      await page.locator(`[data-testid=run-view][data-run-id="${runId}"]`).waitFor()
      expect(await page.getByTestId('fork-link').getAttribute('href')).toBe(`#/runs/${forkId}`)
      await page.close()
      expect(errors).toEqual([])

      const after = await openStore(db)
      try {
        expect(await runCall(listTransitions(after.db, runId))).toEqual(before)
        expect((await runCall(getRun(after.db, forkId)))?.status).toBe('succeeded')
        const forkTransitions = await runCall(listTransitions(after.db, forkId))
        expect(forkTransitions.slice(0, 6).map((t) => t.event)).toEqual(before.slice(0, 6).map((t) => t.event))
        expect(forkTransitions).toHaveLength(12)
      } finally {
        await after.close()
      }
      expect(readFileSync(path.join(dir, 'ws', 'd.txt'), 'utf8')).toBe('d.txt')
    } finally {
      await mock.close()
    }
  })

  it("moves a running run's lit state on the page as the run progresses, without a reload", async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    // The model answers only when the test says so: the page must see the run mid-flight.
    let answer!: () => void
    const answered = new Promise<void>((resolve) => (answer = resolve))
    const gated: Provider = {
      name: 'primary',
      kind: 'scripted',
      chat: () =>
        Effect.promise(() => answered).pipe(
          Effect.as({ text: '', toolCalls: [{ id: 'call-1', name: 'write_file', arguments: JSON.stringify({ path: 'out.txt', content: 'DONE' }) }] })
        )
    }
    const av = await Agentvisor.open({ db, makeProvider: () => gated })
    try {
      const run = await av.start({
        goal: 'Write DONE into out.txt while the inspector watches',
        workspace: path.join(dir, 'ws'),
        providers: [{ name: 'primary', kind: 'scripted', steps: [] }],
        verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
        policy: { layers: [{ name: 'team', allow: { write: ['out.txt'] } }] }
      })
      inspector = await startInspector({ db, port: 0 })
      const { page, errors } = await openPage(`${inspector.url}#/runs/${run.runId}`)
      await expect.poll(() => litState(page).getAttribute('data-state')).toBe('dispatching')
      expect(await page.getByTestId('run-status').getAttribute('data-status')).toBe('running')
      await page.evaluate(() => Object.assign(globalThis, { notReloaded: true }))

      answer()
      expect(await run.result).toMatchObject({ status: 'succeeded' })
      await expect.poll(() => litState(page).getAttribute('data-state'), { timeout: 60_000 }).toBe('finished.succeeded')
      expect(await page.getByTestId('run-status').getAttribute('data-status')).toBe('succeeded')
      expect(await page.locator('[data-testid=timeline-row]').count()).toBe(4)
      expect(await page.evaluate(() => (globalThis as { notReloaded?: boolean }).notReloaded)).toBe(true)
      await page.close()
      expect(errors).toEqual([])
    } finally {
      await av.close()
    }
  })
  it('lists each tree under its root, newest root first, children in spawn order, and orders the tree card and show the same way', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const parts = ['Part 1', 'Part 2', 'Part 3', 'Part 4']
    const mock = await startMockLlm({
      scenarios: {
        models: { m: [{ toolCalls: parts.map((goal) => ({ name: 'spawn_child', arguments: { goal } })) }, { text: 'all parts done' }] },
        goals: Object.fromEntries(parts.map((goal) => [goal, [{ text: `${goal} done` }]]))
      } as never,
      port: 0
    })
    try {
      const task = (goal: string) =>
        writeTask(
          dir,
          {
            goal,
            workspace: 'ws',
            providers: [{ name: 'p', kind: 'openai', baseUrl: mock.url, model: 'm' }],
            children: { maxChildren: 4, maxConcurrent: 4 },
            approval: 'auto'
          },
          `${goal.replace(/\W+/g, '-')}.json`
        )
      const rootId = await cliRun(task('Split into four parts'), db, 0)
      const laterId = await cliRun(
        writeTask(dir, { goal: 'A later run', workspace: 'ws2', providers: [{ name: 's', kind: 'scripted', steps: [{ text: 'hi' }] }] }, 'later.json'),
        db,
        0
      )
      const shown = lastJson<{ children: Array<{ id: string }> }>(await runCli(['show', rootId, '--json', '--db', db]))
      const goalOf = new Map<string, string>()
      for (const child of shown.children)
        goalOf.set(child.id, lastJson<{ run: { goal: string } }>(await runCli(['show', child.id, '--json', '--db', db])).run.goal)
      expect(shown.children.map((child) => goalOf.get(child.id))).toEqual(parts)

      inspector = await startInspector({ db, port: 0 })
      const { page, errors } = await openPage(`${inspector.url}#/runs/${rootId}`)
      await page.getByTestId('children').waitFor()
      const rows = await page
        .locator('[data-testid=run-row]')
        .evaluateAll((nodes) => nodes.map((n) => [n.getAttribute('data-run-id'), n.getAttribute('data-depth')]))
      expect(rows).toEqual([[laterId, '0'], [rootId, '0'], ...shown.children.map((child) => [child.id, '1'])])
      const tree = await page.locator('[data-testid=tree-node]').evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-run-id')))
      expect(tree).toEqual([rootId, ...shown.children.map((child) => child.id)])
      await screenshot(page, 'inspector-tree.png')
      await page.close()
      expect(errors).toEqual([])
    } finally {
      await mock.close()
    }
  })

  it('draws the child-run tree with links that open each run of it', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    let answer!: () => void
    const answered = new Promise<void>((resolve) => (answer = resolve))
    // The parent's model waits until its children are done, so the parent is alive to spawn them.
    const av = await Agentvisor.open({
      db,
      makeProvider: (config) => ({
        name: config.name,
        kind: 'scripted',
        chat: () =>
          Effect.promise(() => answered).pipe(
            Effect.as({ text: '', toolCalls: [{ id: 'w', name: 'write_file', arguments: JSON.stringify({ path: 'out.txt', content: 'DONE' }) }] })
          )
      })
    })
    try {
      const parent = await av.start({
        goal: 'Parent: gather the parts',
        workspace: path.join(dir, 'ws'),
        providers: [{ name: 'primary', kind: 'scripted', steps: [] }],
        verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
        policy: { layers: [{ name: 'team', allow: { write: ['**'] } }] }
      })
      const child = await parent.spawn({ goal: 'Child: write part a', verify: { fileContains: { path: 'out.txt', text: 'DONE' } } })
      answer()
      expect(await child.result).toMatchObject({ status: 'succeeded' })
      expect(await parent.result).toMatchObject({ status: 'succeeded' })
    } finally {
      await av.close()
    }
    const store = await openStore(db)
    const [parentRow, childRow] = await runCall(listRuns(store.db)).finally(() => store.close())
    expect(childRow?.parent_id).toBe(parentRow!.id)

    inspector = await startInspector({ db, port: 0 })
    const { page, errors } = await openPage(`${inspector.url}#/runs/${parentRow!.id}`)
    const tree = page.getByTestId('children')
    await tree.waitFor()
    expect(await tree.locator('[data-testid=tree-node]').evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-run-id')))).toEqual([
      parentRow!.id,
      childRow!.id
    ])
    await tree.locator(`[data-testid=tree-node][data-run-id="${childRow!.id}"] > div > a`).click()
    await page.locator(`[data-testid=run-view][data-run-id="${childRow!.id}"]`).waitFor()
    expect(await page.locator('[data-testid=run-view] h1').textContent()).toBe('Child: write part a')
    await page.close()
    expect(errors).toEqual([])
  })
})

describe('agentvisor inspect', () => {
  it('prints the one line with the URL of the run, serves the page, and returns 0 when stopped', async () => {
    const dir = tempDir()
    const db = path.join(dir, 'av.db')
    const runId = await cliRun(scriptedTask(dir, { goal: 'Write DONE into out.txt', allowWrite: true }), db, 0)
    let stop!: () => void
    const stopped = new Promise<void>((resolve) => (stop = resolve))
    const lines: string[] = []
    const exit = inspectCommand([runId, '--db', db, '--port', '0'], { stop: stopped, print: (line) => lines.push(line), log: () => {} })
    const line = await waitFor(() => lines[0], 'the URL line')
    expect(line).toMatch(new RegExp(`^inspector on http://127\\.0\\.0\\.1:\\d+/\\?token=[\\w-]{32}#/runs/${runId}$`))
    const url = line.slice('inspector on '.length).split('#')[0]!
    const page = await fetch(url)
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'")
    expect(await page.text()).toContain('data-testid="runs-list"')
    stop()
    expect(await exit).toBe(0)
    expect(lines).toHaveLength(1)
    await expect(fetch(url)).rejects.toThrow()
  })

  it('refuses an unknown run id and a bad port as usage errors', async () => {
    const db = path.join(tempDir(), 'av.db')
    await (await openStore(db)).close()
    await expect(inspectCommand(['no-such-run', '--db', db, '--port', '0'], { stop: Promise.resolve() })).rejects.toMatchObject({
      name: 'UsageError',
      message: 'no run with id no-such-run'
    })
    await expect(inspectCommand(['--port', 'eighty', '--db', db])).rejects.toMatchObject({ name: 'UsageError', message: expect.stringContaining('--port') })
    await expect(inspectCommand(['--db', db, 'a', 'b'])).rejects.toMatchObject({ name: 'UsageError', message: 'unexpected argument "b"' })
  })
})
