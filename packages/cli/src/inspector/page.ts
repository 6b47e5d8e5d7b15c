import { readdirSync, readFileSync } from 'node:fs'
import { RunStatus } from '@agentvisor/store'
import { Data } from 'effect'

/** The page's files are not where this install keeps them: the inspector does not start without them. */
export class InspectorPageMissingError extends Data.TaggedError('InspectorPageMissingError')<{ readonly message: string }> {}

/** One file of the page, as it is sent. */
export interface PageAsset {
  readonly body: Buffer
  readonly contentType: string
}

/** The inspector's front end: its HTML document, the files it loads, and the policy it is served under. */
export interface InspectorPage {
  readonly html: string
  readonly csp: string
  /** The page's scripts and stylesheet by file name, served under `/assets/`. */
  readonly assets: ReadonlyMap<string, PageAsset>
}

/**
 * packages/cli/inspector-page/, found the same way from src/inspector/ (tests run from sources)
 * and from dist/inspector/ (the built and the published package): both are two levels under the
 * package. The files there are served as they are written (docs/development.md, "The inspector page").
 */
const PAGE_DIR = new URL('../../inspector-page/', import.meta.url)

const CONTENT_TYPES: ReadonlyMap<string, string> = new Map([
  ['.js', 'text/javascript; charset=utf-8'],
  ['.css', 'text/css; charset=utf-8']
])

/** The files the document itself names: without them the page would be empty. */
const REQUIRED = ['app.js', 'style.css']

const escapeHtml = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')

/** The status filter's choices, written into the document so the page needs no copy of them. */
const statusOptions = (): string =>
  Object.values(RunStatus)
    .map((status) => `<option value="${escapeHtml(status)}">${escapeHtml(status.replace(/_/g, ' '))}</option>`)
    .join('')

const HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agentvisor inspector</title>
<link rel="stylesheet" href="/assets/style.css">
<script type="module" src="/assets/app.js"></script>
</head>
<body>
<header class="top">
  <span class="brand">agentvisor <span>inspector</span></span>
  <span class="db" id="db"></span>
  <span class="live" id="live" data-testid="live-status" data-live="false">connecting...</span>
</header>
<div class="locked" id="locked" data-testid="locked" role="alert" hidden></div>
<div class="layout">
  <aside class="runs">
    <div class="filters">
      <select id="status-filter" data-testid="status-filter" aria-label="status"><option value="">all statuses</option>${statusOptions()}</select>
      <input id="search" data-testid="search-filter" type="search" placeholder="goal or id" aria-label="filter by goal or id">
    </div>
    <div class="count" id="count"></div>
    <ul class="run-list" id="runs-list" data-testid="runs-list"></ul>
  </aside>
  <main class="detail" id="detail"></main>
</div>
</body>
</html>
`

/**
 * The page's scripts and stylesheet. Missing ones fail in one line: an inspector serving an
 * empty page would look like a store without runs.
 */
const loadAssets = (dir: URL): Map<string, PageAsset> => {
  const where = decodeURIComponent(dir.pathname)
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    throw new InspectorPageMissingError({ message: `the inspector's page is missing: no folder ${where} (a broken install of @agentvisor/cli)` })
  }
  const assets = new Map<string, PageAsset>()
  for (const name of names) {
    const contentType = CONTENT_TYPES.get(name.slice(name.lastIndexOf('.')))
    if (contentType !== undefined) assets.set(name, { body: readFileSync(new URL(name, dir)), contentType })
  }
  const absent = REQUIRED.filter((name) => !assets.has(name))
  if (absent.length > 0)
    throw new InspectorPageMissingError({
      message: `the inspector's page is missing ${absent.join(' and ')} in ${where} (a broken install of @agentvisor/cli)`
    })
  return assets
}

/**
 * The whole inspector front end from the page's folder `dir`: one HTML document, and its modules
 * and stylesheet loaded from the inspector itself; nothing fetched from anywhere else, and no
 * build step. The content security policy allows scripts and styles from the inspector's own
 * origin only (no inline ones) and same-origin fetches.
 */
export const loadInspectorPage = (dir: URL): InspectorPage => ({
  html: HTML,
  csp: [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'"
  ].join('; '),
  assets: loadAssets(dir)
})

let loaded: InspectorPage | undefined

/** The page this install serves, read once per process. */
export const inspectorPage = (): InspectorPage => {
  loaded ??= loadInspectorPage(PAGE_DIR)
  return loaded
}
