import { runPromise } from '@agentvisor/actors'
import { getRunRow, openStore } from '@agentvisor/store'
import { existingStorePath } from '../store-path.js'
import { DEFAULT_INSPECTOR_PORT, startInspector } from '../inspector/server.js'
import { say } from '../output.js'
import { terminalSafe } from '../terminal-text.js'
import { parseCommandArgs, UsageError } from '../usage-error.js'

/** What the command needs from its process; tests pass their own. */
export interface InspectIo {
  /** Stops the inspector (default: the first SIGINT or SIGTERM). */
  readonly stop?: Promise<void>
  /** Receives the one stdout line naming the URL (default: stdout). */
  readonly print?: (line: string) => void
  /** Receives the human notes (default: stderr). */
  readonly log?: (line: string) => void
}

const parsePort = (text: string | undefined): number => {
  if (text === undefined) return DEFAULT_INSPECTOR_PORT
  const port = Number(text)
  if (!/^\d+$/.test(text) || !Number.isInteger(port) || port > 65535) throw new UsageError(`--port must be a port number from 0 to 65535 (got "${text}")`)
  return port
}

const untilSignal = (): Promise<void> =>
  new Promise((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
      resolve()
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
  })

/**
 * `agentvisor inspect [RUN] [--port N] [--host H] [--no-token] [--db PATH]`: serves the web
 * inspector until SIGINT or SIGTERM. Prints one line on stdout, the URL (of RUN's page when
 * given) with the token, the only place the token ever appears (docs/inspector.md, "Security").
 */
export const inspectCommand = async (argv: string[], io: InspectIo = {}): Promise<number> => {
  const { values, positionals } = parseCommandArgs(
    argv,
    { port: { type: 'string' }, host: { type: 'string' }, 'no-token': { type: 'boolean' }, db: { type: 'string' } },
    { min: 0, max: 1, names: '' }
  )
  const port = parsePort(values.port)
  const host = values.host ?? '127.0.0.1'
  if (host.trim() === '') throw new UsageError('--host must name an address, e.g. 127.0.0.1')
  const db = existingStorePath(values.db)
  const runId = positionals[0]
  if (runId !== undefined) {
    const store = await openStore(db, { readOnly: true })
    try {
      if ((await runPromise(getRunRow(store.db, runId))) === undefined) throw new UsageError(`no run with id ${runId}`)
    } finally {
      await store.close()
    }
  }
  // Listen first so the signal handlers are in place only once there is something to stop.
  let inspector
  try {
    inspector = await startInspector({ db, port, host, token: values['no-token'] !== true })
  } catch (error) {
    const code = (error as { code?: unknown }).code
    if (code === 'EADDRINUSE') throw new UsageError(`port ${port} on ${host} is in use (try --port 0 for a free one)`)
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') throw new UsageError(`cannot listen on ${host}: no such local address`)
    throw error
  }
  const stop = io.stop ?? untilSignal()
  const url = `${inspector.url}${runId === undefined ? '' : `#/runs/${encodeURIComponent(runId)}`}`
  ;(io.print ?? ((line: string) => process.stdout.write(`${terminalSafe(line)}\n`)))(`inspector on ${url}`)
  const log = io.log ?? say
  const where = new URL(inspector.url).host
  if (inspector.token === undefined) {
    log(`agentvisor: --no-token: the inspector has no authentication; any process or person that reaches ${where} can read every run and decide its approvals`)
  } else if (!['127.0.0.1', 'localhost', '::1'].includes(host)) {
    log(`agentvisor: the inspector speaks plain HTTP on ${where}: its token crosses the network unencrypted`)
  }
  log(`reading ${inspector.db}; Ctrl-C stops`)
  try {
    await stop
  } finally {
    await inspector.close()
  }
  return 0
}
