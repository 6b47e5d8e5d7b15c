import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { InspectorPageMissingError, inspectorPage, loadInspectorPage } from '../src/inspector/page.js'
import { startInspector } from '../src/inspector/server.js'

const PAGE_DIR = path.resolve(import.meta.dirname, '../inspector-page')
const temp = mkdtempSync(path.join(tmpdir(), 'av-page-'))
afterAll(() => rmSync(temp, { recursive: true, force: true }))

/** The relative modules a script imports (`import ... from './x.js'`, type imports in comments aside). */
const importsOf = (source: string): string[] => [...source.matchAll(/^import [^'\n]*'\.\/([\w-]+\.js)'/gm)].map((m) => m[1]!)

describe("the inspector page's files", () => {
  it('serves every module the document loads and every module they import, under a policy with no inline script or style', () => {
    const page = inspectorPage()
    expect(page.html).toContain('<script type="module" src="/assets/app.js"></script>')
    expect(page.html).toContain('<link rel="stylesheet" href="/assets/style.css">')
    expect(page.html).toContain('<option value="awaiting_approval">awaiting approval</option>')
    expect(page.html).not.toMatch(/<script>|<style>/)
    const seen = new Set<string>()
    const walk = (name: string): void => {
      if (seen.has(name)) return
      seen.add(name)
      const asset = page.assets.get(name)
      expect(asset, name).toBeDefined()
      expect(asset!.body.equals(readFileSync(path.join(PAGE_DIR, name)))).toBe(true)
      for (const imported of importsOf(asset!.body.toString('utf8'))) walk(imported)
    }
    walk('app.js')
    expect(seen.size).toBeGreaterThan(5)
    expect(page.assets.get('style.css')?.contentType).toBe('text/css; charset=utf-8')
    expect(page.csp.split('; ')).toEqual(expect.arrayContaining(["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'"]))
    expect(page.csp).not.toContain('unsafe')
  })

  it('fails in one line naming what is missing, never serving an empty page', () => {
    const dir = path.join(temp, 'no-app')
    mkdirSync(dir)
    writeFileSync(path.join(dir, 'style.css'), 'body {}')
    const missing = (at: string) => {
      try {
        loadInspectorPage(pathToFileURL(`${at}/`))
      } catch (error) {
        return error
      }
      return undefined
    }
    const noApp = missing(dir)
    expect(noApp).toBeInstanceOf(InspectorPageMissingError)
    expect((noApp as Error).message).toBe(`the inspector's page is missing app.js in ${dir}/ (a broken install of @agentvisor/cli)`)
    const noFolder = missing(path.join(temp, 'absent'))
    expect(noFolder).toBeInstanceOf(InspectorPageMissingError)
    expect((noFolder as Error).message).toBe(`the inspector's page is missing: no folder ${path.join(temp, 'absent')}/ (a broken install of @agentvisor/cli)`)
  })

  it("serves its files to the token's holder only, as JavaScript and CSS, and nothing else under /assets/", async () => {
    const inspector = await startInspector({ db: path.join(temp, 'av.db'), port: 0 })
    try {
      const get = (at: string, bearer: boolean) => fetch(new URL(at, inspector.url), bearer ? { headers: { authorization: `Bearer ${inspector.token}` } } : {})
      const refused = await get('/assets/app.js', false)
      expect(refused.status).toBe(401)
      expect(await refused.text()).not.toContain('import')
      const app = await get('/assets/app.js', true)
      expect(app.status).toBe(200)
      expect(app.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
      expect(app.headers.get('x-content-type-options')).toBe('nosniff')
      expect(await app.text()).toBe(readFileSync(path.join(PAGE_DIR, 'app.js'), 'utf8'))
      expect((await get('/assets/tsconfig.json', true)).status).toBe(404)
      expect((await get('/assets/..%2Fsrc%2Findex.ts', true)).status).toBe(404)
      expect((await get('/assets/nope.js', true)).status).toBe(404)
    } finally {
      await inspector.close()
    }
  })
})
