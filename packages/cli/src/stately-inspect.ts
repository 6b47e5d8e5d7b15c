import { DEFAULT_INSPECTOR_RELAY, openStatelyInspector, type StatelyInspector } from '@agentvisor/actors'
import { say } from './output.js'
import { UsageError } from './usage-error.js'

const RELAY_URL = /^wss?:\/\/\S+$/i

/**
 * Lets `--inspect` take an optional URL, which `node:util` parseArgs cannot express: a bare
 * `--inspect` (last, or followed by anything but a ws:// or wss:// URL) becomes
 * `--inspect=<default relay>`; `--inspect URL` and `--inspect=URL` are left as they are.
 */
export const withInspectDefault = (argv: ReadonlyArray<string>): string[] => {
  const out: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === '--') {
      out.push(...argv.slice(i))
      break
    }
    const next = argv[i + 1]
    out.push(arg === '--inspect' && (next === undefined || !RELAY_URL.test(next)) ? `--inspect=${DEFAULT_INSPECTOR_RELAY}` : arg)
  }
  return out
}

/**
 * Connects to the Stately inspector relay named by `--inspect` (undefined without the flag).
 * An unreachable relay is reported once through `log` (stderr) and never stops or slows a run;
 * the caller must `stop()` it so that the process can exit.
 */
export const startInspector = async (
  url: string | undefined,
  log: (line: string) => void = (line) => say(`agentvisor: ${line}`)
): Promise<StatelyInspector | undefined> => {
  if (url === undefined) return undefined
  if (!RELAY_URL.test(url)) throw new UsageError(`--inspect takes the ws:// or wss:// URL of an inspector relay (got "${url}")`)
  const inspector = await openStatelyInspector({
    url,
    onUnreachable: (reason) => log(`warning: the inspector relay at ${url} is unreachable (${reason}); runs go on without it`)
  })
  log(`streaming inspection events to ${url}`)
  return inspector
}

/** The `Agentvisor.open` options that wire an inspector in (none without one). */
export const inspectOptions = (inspector: StatelyInspector | undefined): { inspect?: StatelyInspector['inspect'] } =>
  inspector === undefined ? {} : { inspect: inspector.inspect }
