import { createRequire } from 'node:module'
import { maskUrlCredentials } from '@agentvisor/core/secrets'
import { COMMAND_HELP } from './help.js'
import { printJson } from './output.js'
import { terminalSafe } from './terminal-text.js'
import { ExitCode, UsageError } from './usage-error.js'

const HELP = `agentvisor: a durable, supervised orchestrator for LLM agent runs

usage:
  agentvisor run TASK [--json] [--db PATH] [--approval prompt|defer|auto] [--nats URL] [--inspect [URL]]
  agentvisor resume RUN [--json] [--db PATH] [--nats URL] [--inspect [URL]]
  agentvisor resume --all [--json] [--db PATH] [--nats URL] [--inspect [URL]]
  agentvisor runs [--json] [--status S] [--db PATH]
  agentvisor show RUN [--json] [--db PATH]
  agentvisor watch RUN [--json] [--from SEQ] [--db PATH]
  agentvisor approve RUN [REQUEST] [--deny] [--remember] [--edit JSON] [--db PATH] [--json]
  agentvisor approve RUN [REQUEST] --retry | --completed TEXT | --abort   (an interrupted exec)
  agentvisor answer RUN [REQUEST] TEXT [--db PATH] [--json]
  agentvisor send RUN TEXT [--json] [--db PATH] [--nats URL]
  agentvisor fork RUN --at SEQ [--json] [--db PATH] [--nats URL]
  agentvisor replay RUN|--all [--status S] [--task FILE] [--workspace DIR] [--keep] [--json] [--db PATH]
  agentvisor cancel RUN [--json] [--db PATH]
  agentvisor worker --nats URL [--db PATH] [--concurrency N] [--tools MODULES] [--submit-template FILE] [--store-outage-ms N] [--inspect [URL]]
  agentvisor inspect [RUN] [--port N] [--host H] [--no-token] [--db PATH]
  agentvisor mock-llm --scenarios FILE [--port N] [--record FILE]

The store is --db PATH, else $AGENTVISOR_DB, else .agentvisor/agentvisor.db under the current folder.
Exit codes: 0 run succeeded; 1 run ended otherwise; 2 usage or invalid input; 3 paused awaiting approval or an answer.
agentvisor COMMAND --help tells more about each command, with examples.

examples:
  agentvisor run examples/single-agent/task.json --json
  agentvisor runs --status failed
  agentvisor show 0b7c... --json
`

type Command = (argv: string[]) => Promise<number>

const requireModule = createRequire(import.meta.url)

/**
 * Loads a command's module. Where Node can `require()` an ES module (20.19 and later), the whole
 * graph is read, linked and run synchronously: `import()` pays an asynchronous file read and a
 * promise round trip per module, a third of `agentvisor runs`' start-up on its ~350 modules
 * (Kysely alone is ~260). A graph with top-level await cannot be required; it, and older Nodes,
 * go through `import()`, which then finds whatever the attempt already loaded.
 */
const loadModule = async <T>(specifier: string): Promise<T> => {
  if (process.features.require_module === true) {
    try {
      return requireModule(specifier) as T
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ERR_REQUIRE_ASYNC_MODULE') throw error
    }
  }
  return (await import(specifier)) as T
}

// Each command is imported on demand so `agentvisor runs` never loads the machine or the SDKs.
const COMMANDS: Readonly<Record<string, () => Promise<Command>>> = {
  run: async () => (await loadModule<typeof import('./commands/run.js')>('./commands/run.js')).runCommand,
  resume: async () => (await loadModule<typeof import('./commands/resume.js')>('./commands/resume.js')).resumeCommand,
  runs: async () => (await loadModule<typeof import('./commands/runs.js')>('./commands/runs.js')).runsCommand,
  show: async () => (await loadModule<typeof import('./commands/show.js')>('./commands/show.js')).showCommand,
  watch: async () => (await loadModule<typeof import('./commands/watch.js')>('./commands/watch.js')).watchCommand,
  approve: async () => (await loadModule<typeof import('./commands/approve.js')>('./commands/approve.js')).approveCommand,
  fork: async () => (await loadModule<typeof import('./commands/fork.js')>('./commands/fork.js')).forkCommand,
  replay: async () => (await loadModule<typeof import('./commands/replay.js')>('./commands/replay.js')).replayCommand,
  send: async () => (await loadModule<typeof import('./commands/send.js')>('./commands/send.js')).sendCommand,
  answer: async () => (await loadModule<typeof import('./commands/answer.js')>('./commands/answer.js')).answerCommand,
  cancel: async () => (await loadModule<typeof import('./commands/cancel.js')>('./commands/cancel.js')).cancelCommand,
  worker: async () => (await loadModule<typeof import('./commands/worker.js')>('./commands/worker.js')).workerCommand,
  inspect: async () => (await loadModule<typeof import('./commands/inspect.js')>('./commands/inspect.js')).inspectCommand,
  'mock-llm': async () => (await loadModule<typeof import('./commands/mock-llm.js')>('./commands/mock-llm.js')).mockLlmCommand
}

/** Errors a user caused (bad input, unknown run) exit 2 with one line; nothing prints a stack. */
const isUserError = (error: unknown): error is Error =>
  error instanceof UsageError ||
  (typeof error === 'object' &&
    error !== null &&
    '_tag' in error &&
    [
      'ContractError',
      'ApprovalError',
      'BusError',
      'LeaseConflictError',
      'RunNotFoundError',
      'RunNotResumableError',
      'FollowUpRefusedError',
      'ForkRefusedError',
      'ReplayRefusedError',
      'WorkspaceError',
      'WorkspaceEscapeError',
      'StoreError'
    ].includes(String((error as { _tag: unknown })._tag)))

/**
 * An error as the one line printed: a message can quote a field name, a path or a server URL
 * from the input, so it is made terminal-safe and any URL's credentials read `***` (docs/cli.md).
 */
const errorLine = (message: string): string => terminalSafe(maskUrlCredentials(message.split('\n')[0]!))

/** Runs one `agentvisor` command and returns its exit code. */
export const main = async (argv: string[]): Promise<number> => {
  const [name, ...rest] = argv
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(HELP)
    return name === undefined ? ExitCode.usage : 0
  }
  const load = COMMANDS[name]
  const help = COMMAND_HELP[name]
  if (load !== undefined && help !== undefined && (rest.includes('--help') || rest.includes('-h'))) {
    process.stdout.write(help)
    return 0
  }
  if (load === undefined) {
    process.stderr.write(`agentvisor: unknown command "${terminalSafe(name)}" (try agentvisor --help)\n`)
    return ExitCode.usage
  }
  try {
    return await (await load())(rest)
  } catch (error) {
    if (isUserError(error)) {
      process.stderr.write(`agentvisor: ${errorLine(error.message)}\n`)
      // docs/cli.md: with --json, an exit-2 error is also the last line of stdout.
      if (rest.includes('--json')) printJson({ error: { kind: 'input', message: maskUrlCredentials(error.message.split('\n')[0]!) } })
      return ExitCode.usage
    }
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error)
    process.stderr.write(`agentvisor: internal error: ${errorLine(message ?? '')}\n`)
    return ExitCode.failed
  }
}

/**
 * Whether the process may end as soon as the command's output is flushed: `runs` and `show`
 * read the store, print and close it, and leave nothing running. Ending then, with
 * `process.exit`, skips Node's teardown of a heap of ~350 modules (5-10 ms of each call).
 */
export const endsWhenFlushed = (argv: readonly string[]): boolean => argv[0] === 'runs' || argv[0] === 'show'

/** Exits with `code` once everything written to stdout and stderr has been handed to the OS. */
export const exitWhenFlushed = async (code: number): Promise<never> => {
  await Promise.all([flushed(process.stdout), flushed(process.stderr)])
  process.exit(code)
}

// An empty write completes after every write before it (a pipe drains asynchronously).
const flushed = (stream: NodeJS.WriteStream): Promise<void> =>
  stream.writableLength === 0 ? Promise.resolve() : new Promise((resolve) => stream.write('', () => resolve()))
