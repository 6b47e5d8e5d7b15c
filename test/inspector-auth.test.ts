import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import * as path from 'node:path'
import { getRun, listApprovals, listRuns, openStore } from '@agentvisor/store'
import type { Browser } from 'playwright-core'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { inspectCommand } from '../packages/cli/src/commands/inspect.js'
import { type Inspector, startInspector } from '../packages/cli/src/inspector/server.js'
import { launchChromium } from './support/chromium.js'
import { BIN, lastJson, runCli, tempDir, waitFor, writeTask } from './support/cli.js'
import { inspectorFetch, inspectorPost } from './support/inspector.js'
import { runCall } from './support/run-call.js'

// The inspector's token (docs/inspector.md, "Security"): made at start, printed once in the URL,
// kept by the page as a cookie, required of the page, every API route and the event stream.

/** A run paused on its write (exit 3): one pending approval. */
const pausedRun = async (): Promise<{ dir: string; db: string; runId: string; requestId: string }> => {
  const dir = tempDir()
  const db = path.join(dir, 'av.db')
  const task = writeTask(dir, {
    goal: 'Write DONE into out.txt once approved',
    workspace: 'ws',
    providers: [{ name: 'primary', kind: 'scripted', steps: [{ toolCalls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'DONE' } }] }] }],
    verify: { fileContains: { path: 'out.txt', text: 'DONE' } },
    policy: { layers: [{ name: 'team', ask: { write: ['**'] } }] },
    approval: 'defer'
  })
  const result = await runCli(['run', task, '--json', '--db', db])
  expect(result.code, result.stderr).toBe(3)
  const { runId } = lastJson<{ runId: string }>(result)
  const store = await openStore(db)
  try {
    const [request] = await runCall(listApprovals(store.db, runId))
    return { dir, db, runId, requestId: request!.id }
  } finally {
    await store.close()
  }
}

/** The run's status and its requests' statuses, as the store has them. */
const stored = async (db: string, runId: string): Promise<{ status: string | undefined; requests: string[]; runs: number }> => {
  const store = await openStore(db)
  try {
    return {
      status: (await runCall(getRun(store.db, runId)))?.status,
      requests: (await runCall(listApprovals(store.db, runId))).map((a) => a.status),
      runs: (await runCall(listRuns(store.db))).length
    }
  } finally {
    await store.close()
  }
}

/** Every route of the API and the methods it takes, for a run and one of its requests. */
const routes = (runId: string, requestId: string): Array<{ method: 'GET' | 'POST'; path: string; body?: string }> => [
  { method: 'GET', path: '/api/info' },
  { method: 'GET', path: '/api/machine' },
  { method: 'GET', path: '/api/runs' },
  { method: 'GET', path: `/api/runs/${runId}` },
  { method: 'GET', path: '/api/events' },
  { method: 'POST', path: `/api/runs/${runId}/approvals/${requestId}`, body: '{"decision":"approve"}' },
  { method: 'POST', path: `/api/runs/${runId}/answers/${requestId}`, body: '{"text":"yes"}' },
  { method: 'POST', path: `/api/runs/${runId}/resume`, body: '{}' },
  { method: 'POST', path: `/api/runs/${runId}/cancel`, body: '{}' },
  { method: 'POST', path: `/api/runs/${runId}/fork`, body: '{"seq":1}' }
]

let inspector: Inspector | undefined
afterEach(async () => {
  await inspector?.close()
  inspector = undefined
})

describe('the inspector token', () => {
  it('refuses the page, every API route and the event stream without the token (401, a one-line JSON error), and decides nothing', async () => {
    const { db, runId, requestId } = await pausedRun()
    inspector = await startInspector({ db, port: 0 })
    const token = inspector.token!
    expect(token).toMatch(/^[\w-]{32}$/)
    expect(inspector.url).toBe(`${new URL(inspector.url).origin}/?token=${token}`)
    const wrong = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`
    const port = new URL(inspector.url).port
    const refusals: Array<Record<string, string>> = [
      {},
      { authorization: `Bearer ${wrong}` },
      { authorization: `Basic ${Buffer.from(`x:${token}`).toString('base64')}` },
      { cookie: `agentvisor_inspector_${port}=${wrong}` },
      // The cookie of an inspector on another port does not open this one.
      { cookie: `agentvisor_inspector_1=${token}` }
    ]
    for (const headers of refusals) {
      for (const route of routes(runId, requestId)) {
        const what = `${route.method} ${route.path} with ${JSON.stringify(headers)}`
        const res = await fetch(new URL(route.path, inspector.url), {
          method: route.method,
          headers: route.body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
          ...(route.body === undefined ? {} : { body: route.body })
        })
        expect(res.status, what).toBe(401)
        expect(res.headers.get('www-authenticate'), what).toContain('Bearer')
        const body = (await res.json()) as { error: string }
        expect(body.error, what).toMatch(/^this inspector needs its token[^\n]*$/)
        expect(body.error, what).not.toContain(token)
      }
      const page = await fetch(new URL('/', inspector.url), { headers })
      expect(page.status).toBe(401)
      expect(page.headers.get('set-cookie')).toBeNull()
    }
    const stale = await fetch(new URL(`/?token=${wrong}`, inspector.url))
    expect(stale.status).toBe(401)
    expect(stale.headers.get('set-cookie')).toBeNull()
    expect(await stale.text()).not.toContain('data-testid')
    // None of it decided, answered, resumed, cancelled or forked anything.
    expect(await stored(db, runId)).toEqual({ status: 'awaiting_approval', requests: ['pending'], runs: 1 })
  })

  it('serves every API route and the event stream to the bearer token, and the page to ?token= with an HttpOnly SameSite=Strict cookie that then suffices', async () => {
    const { dir, db, runId, requestId } = await pausedRun()
    inspector = await startInspector({ db, port: 0 })
    const port = new URL(inspector.url).port
    // Each route reaches its handler: what it answers is its own verdict, not the token's.
    const expected: Record<string, number> = {
      [`GET /api/runs/${runId}`]: 200,
      [`POST /api/runs/${runId}/answers/${requestId}`]: 404,
      [`POST /api/runs/${runId}/resume`]: 409,
      [`POST /api/runs/${runId}/fork`]: 200
    }
    for (const route of routes(runId, requestId)) {
      if (route.path.endsWith(`/approvals/${requestId}`) || route.path.endsWith('/cancel')) continue
      const key = `${route.method} ${route.path}`
      const controller = new AbortController()
      const res =
        route.body === undefined
          ? await inspectorFetch(inspector, route.path, { signal: controller.signal })
          : await inspectorPost(inspector, route.path, route.body)
      expect(res.status, key).toBe(expected[key] ?? 200)
      if (route.path === '/api/events') {
        expect(res.headers.get('content-type')).toContain('text/event-stream')
        controller.abort()
      }
    }

    const page = await fetch(inspector.url)
    expect(page.status).toBe(200)
    const cookie = page.headers.get('set-cookie')!
    expect(cookie).toMatch(new RegExp(`^agentvisor_inspector_${port}=${inspector.token}; `))
    expect(cookie.split('; ').slice(1).sort()).toEqual(['HttpOnly', 'Path=/', 'SameSite=Strict'])
    expect(page.headers.get('referrer-policy')).toBe('no-referrer')
    expect(await page.text()).toContain('data-testid="runs-list"')
    const jar = { cookie: cookie.split(';')[0]! }
    expect((await fetch(new URL('/', inspector.url), { headers: jar })).status).toBe(200)
    const events = new AbortController()
    const stream = await fetch(new URL('/api/events', inspector.url), { headers: jar, signal: events.signal })
    expect(stream.status).toBe(200)
    events.abort()
    // The cookie decides, as the page's own fetch sends it.
    const approved = await fetch(new URL(`/api/runs/${runId}/approvals/${requestId}`, inspector.url), {
      method: 'POST',
      headers: { ...jar, 'content-type': 'application/json', origin: new URL(inspector.url).origin, 'sec-fetch-site': 'same-origin' },
      body: '{"decision":"approve"}'
    })
    expect(approved.status).toBe(200)
    expect(await approved.json()).toMatchObject({ requestId, status: 'approved', resumed: true })
    await waitFor(async () => ((await stored(db, runId)).status === 'succeeded' ? true : undefined), 'the approved run to finish')
    expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('DONE')
    // The token is in no file of the store: it lives in the inspector's memory only.
    for (const file of [db, `${db}-wal`]) if (existsSync(file)) expect(readFileSync(file).includes(inspector.token!)).toBe(false)
  })

  it('refuses with 403 a decision another site made without an Origin (Sec-Fetch-Site, a foreign Referer), even with the token, and the approval stays pending', async () => {
    const { db, runId, requestId } = await pausedRun()
    inspector = await startInspector({ db, port: 0 })
    const own = new URL(inspector.url).origin
    const decide = (headers: Record<string, string>) =>
      inspectorPost(inspector!, `/api/runs/${runId}/approvals/${requestId}`, '{"decision":"approve"}', headers)
    const foreign: Array<Record<string, string>> = [
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
      { 'sec-fetch-site': 'none' },
      { referer: 'http://evil.example/page' },
      { referer: `http://localhost:${new URL(inspector.url).port}/` },
      { referer: 'not a url' },
      { origin: 'http://evil.example' },
      { origin: 'null' },
      { origin: own, 'sec-fetch-site': 'cross-site' }
    ]
    for (const headers of foreign) {
      const res = await decide(headers)
      expect(res.status, JSON.stringify(headers)).toBe(403)
      expect(await res.json()).toEqual({ error: 'decisions are accepted only from the inspector page itself' })
    }
    for (const action of ['cancel', 'resume']) {
      expect((await inspectorPost(inspector, `/api/runs/${runId}/${action}`, '{}', { 'sec-fetch-site': 'cross-site' })).status).toBe(403)
    }
    expect((await inspectorPost(inspector, `/api/runs/${runId}/fork`, '{"seq":1}', { referer: 'http://evil.example/' })).status).toBe(403)
    expect((await inspectorPost(inspector, `/api/runs/${runId}/answers/${requestId}`, '{"text":"x"}', { 'sec-fetch-site': 'cross-site' })).status).toBe(403)
    expect(await stored(db, runId)).toEqual({ status: 'awaiting_approval', requests: ['pending'], runs: 1 })

    // What the page itself sends is accepted.
    const ok = await decide({ origin: own, 'sec-fetch-site': 'same-origin', referer: `${own}/` })
    expect(ok.status).toBe(200)
    await waitFor(async () => ((await stored(db, runId)).status === 'succeeded' ? true : undefined), 'the approved run to finish')
  })

  it('with token: false serves everything to anyone, and its URL names no token', async () => {
    const { db, runId, requestId } = await pausedRun()
    inspector = await startInspector({ db, port: 0, token: false })
    expect(inspector.token).toBeUndefined()
    expect(inspector.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/)
    const page = await fetch(inspector.url)
    expect(page.status).toBe(200)
    expect(page.headers.get('set-cookie')).toBeNull()
    expect((await fetch(new URL(`/api/runs/${runId}`, inspector.url))).status).toBe(200)
    const approved = await fetch(new URL(`/api/runs/${runId}/approvals/${requestId}`, inspector.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"decision":"deny"}'
    })
    expect(approved.status).toBe(200)
    // Denied, the run went on without the write (and asked again at its next step).
    expect((await stored(db, runId)).requests[0]).toBe('denied')
  })
})

describe('the inspector token in headless Chromium', () => {
  let browser: Browser
  beforeAll(async () => {
    browser = await launchChromium()
  })
  afterAll(async () => {
    await browser?.close()
  })

  it('keeps the token as a cookie, takes it off the address bar, decides with it across a reload, and says so when it is gone', async () => {
    const { dir, db, runId } = await pausedRun()
    inspector = await startInspector({ db, port: 0 })
    const context = await browser.newContext()
    try {
      const page = await context.newPage()
      const errors: string[] = []
      page.on('pageerror', (error) => errors.push(error.message))
      await page.goto(`${inspector.url}#/runs/${runId}`)
      await page.locator(`[data-testid=run-view][data-run-id="${runId}"]`).waitFor()
      await expect.poll(() => page.getByTestId('live-status').getAttribute('data-live')).toBe('true')
      expect(page.url()).toBe(`${new URL(inspector.url).origin}/#/runs/${runId}`)
      const cookies = await context.cookies()
      expect(cookies).toEqual([
        expect.objectContaining({ name: `agentvisor_inspector_${new URL(inspector.url).port}`, value: inspector.token, httpOnly: true, sameSite: 'Strict' })
      ])
      expect(await page.evaluate('document.cookie')).toBe('')

      await page.reload()
      await page.locator('[data-testid=approval-row] [data-testid=approve]').click()
      await expect.poll(() => page.getByTestId('run-status').getAttribute('data-status'), { timeout: 20_000 }).toBe('succeeded')
      expect(readFileSync(path.join(dir, 'ws', 'out.txt'), 'utf8')).toBe('DONE')
      const store = await openStore(db)
      try {
        expect(await runCall(listApprovals(store.db, runId))).toEqual([expect.objectContaining({ status: 'approved', source: 'inspector' })])
      } finally {
        await store.close()
      }

      // Without the cookie (cleared, or an inspector restarted with a new token) the page says what to do.
      await context.clearCookies()
      await page.evaluate("location.hash = '#/runs/another'")
      await page.getByTestId('locked').waitFor()
      expect(await page.getByTestId('locked').textContent()).toMatch(/^this inspector needs its token: open the URL it printed/)
      expect(errors).toEqual([])
    } finally {
      await context.close()
    }

    // A browser that never had the URL gets nothing.
    const stranger = await browser.newContext()
    try {
      const res = await (await stranger.newPage()).goto(`${new URL(inspector.url).origin}/#/runs/${runId}`)
      expect(res?.status()).toBe(401)
      expect(await stranger.cookies()).toEqual([])
    } finally {
      await stranger.close()
    }
  })
})

describe('agentvisor inspect and its token', () => {
  let child: ChildProcess | undefined
  afterEach(async () => {
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child!.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }
    child = undefined
  })

  /** The built CLI's `inspect ARGS`: its URL line once printed, then what it wrote when stopped with SIGTERM. */
  const startBin = async (args: string[]) => {
    const proc = spawn(process.execPath, [BIN, 'inspect', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    child = proc
    let stdout = ''
    let stderr = ''
    proc.stdout!.on('data', (d: Buffer) => (stdout += d.toString()))
    proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
    const exited = new Promise<number | null>((resolve) => proc.once('close', resolve))
    const url = await waitFor(() => {
      if (proc.exitCode !== null) throw new Error(`inspect exited ${proc.exitCode}: ${stderr}`)
      return /^inspector on (\S+)\n/.exec(stdout)?.[1]
    }, 'the URL line')
    return {
      url,
      stop: async () => {
        proc.kill('SIGTERM')
        return { code: await exited, stdout, stderr }
      }
    }
  }

  it('prints the token in the one URL line and nowhere else, and --no-token serves without one, saying so', async () => {
    const { db, runId } = await pausedRun()
    const served = await startBin([runId, '--db', db])
    const printed = new URL(served.url)
    const token = printed.searchParams.get('token')!
    expect(token).toMatch(/^[\w-]{32}$/)
    expect(printed.hash).toBe(`#/runs/${runId}`)
    expect((await fetch(new URL(`/api/runs/${runId}`, printed))).status).toBe(401)
    expect((await fetch(new URL(`/api/runs/${runId}`, printed), { headers: { authorization: `Bearer ${token}` } })).status).toBe(200)
    const ended = await served.stop()
    expect(ended.code).toBe(0)
    expect(ended.stdout.split(token)).toHaveLength(2)
    expect(ended.stderr).not.toContain(token)
    expect(ended.stderr).not.toContain('no authentication')

    const open = await startBin(['--no-token', '--db', db])
    expect(open.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/)
    expect((await fetch(new URL(`/api/runs/${runId}`, open.url))).status).toBe(200)
    const openEnded = await open.stop()
    expect(openEnded.code).toBe(0)
    expect(openEnded.stderr).toContain('--no-token: the inspector has no authentication')

    const help = await runCli(['inspect', '--help'])
    expect(help.stdout).toContain('--no-token')
  })

  it('passes --no-token to the inspector it starts, and rejects a value for it as a usage error', async () => {
    const { db } = await pausedRun()
    let stop!: () => void
    const stopped = new Promise<void>((resolve) => (stop = resolve))
    const lines: string[] = []
    const logs: string[] = []
    const exit = inspectCommand(['--no-token', '--db', db, '--port', '0'], { stop: stopped, print: (line) => lines.push(line), log: (line) => logs.push(line) })
    const line = await waitFor(() => lines[0], 'the URL line')
    expect(line).toMatch(/^inspector on http:\/\/127\.0\.0\.1:\d+\/$/)
    expect(logs[0]).toMatch(/^agentvisor: --no-token: the inspector has no authentication; any process or person that reaches 127\.0\.0\.1:\d+ can read/)
    stop()
    expect(await exit).toBe(0)
    await expect(inspectCommand(['--no-token=yes', '--db', db], { stop: Promise.resolve() })).rejects.toMatchObject({ name: 'UsageError' })
  })
})
