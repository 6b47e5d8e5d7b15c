import { COMMAND_HELP } from './help.js'
import { ExitCode, UsageError } from './usage-error.js'

const HELP = `agentvisor: a durable, supervised orchestrator for LLM agent runs

usage:
  agentvisor run TASK [--json] [--db PATH] [--approval prompt|defer|auto] [--nats URL]
  agentvisor resume RUN [--json] [--db PATH]
  agentvisor resume --all [--db PATH]
  agentvisor runs [--json] [--status S] [--db PATH]
  agentvisor show RUN [--json] [--db PATH]
  agentvisor approve RUN [REQUEST] [--deny] [--remember] [--edit JSON] [--db PATH]
  agentvisor approve RUN [REQUEST] --retry | --completed TEXT | --abort   (an interrupted exec)
  agentvisor cancel RUN [--db PATH]
  agentvisor worker --nats URL [--db PATH] [--concurrency N]
  agentvisor inspect [RUN] [--port N] [--host H] [--db PATH]
  agentvisor mock-llm --scenarios FILE [--port N] [--record FILE]

The store is --db PATH, else $AGENTVISOR_DB, else .agentvisor/agentvisor.db under the current folder.
Exit codes: 0 run succeeded; 1 run ended otherwise; 2 usage or invalid input; 3 paused awaiting approval.
agentvisor COMMAND --help tells more about each command, with examples.

examples:
  agentvisor run examples/single-agent/task.json --json
  agentvisor runs --status failed
  agentvisor show 0b7c... --json
`

type Command = (argv: string[]) => Promise<number>

// Each command is imported on demand so `agentvisor runs` never loads the machine or the SDKs.
const COMMANDS: Readonly<Record<string, () => Promise<Command>>> = {
  run: async () => (await import('./commands/run.js')).runCommand,
  resume: async () => (await import('./commands/resume.js')).resumeCommand,
  runs: async () => (await import('./commands/runs.js')).runsCommand,
  show: async () => (await import('./commands/show.js')).showCommand,
  approve: async () => (await import('./commands/approve.js')).approveCommand,
  cancel: async () => (await import('./commands/cancel.js')).cancelCommand,
  worker: async () => (await import('./commands/worker.js')).workerCommand,
  inspect: async () => (await import('./commands/inspect.js')).inspectCommand,
  'mock-llm': async () => (await import('./commands/mock-llm.js')).mockLlmCommand
}

/** Errors a user caused (bad input, unknown run) exit 2 with one line; nothing prints a stack. */
const isUserError = (error: unknown): error is Error =>
  error instanceof UsageError ||
  (typeof error === 'object' &&
    error !== null &&
    '_tag' in error &&
    ['ContractError', 'ApprovalError', 'BusError', 'LeaseConflictError', 'RunNotFoundError', 'RunNotResumableError', 'WorkspaceError', 'WorkspaceEscapeError', 'StoreError'].includes(
      String((error as { _tag: unknown })._tag)
    ))

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
    process.stderr.write(`agentvisor: unknown command "${name}" (try agentvisor --help)\n`)
    return ExitCode.usage
  }
  try {
    return await (await load())(rest)
  } catch (error) {
    if (isUserError(error)) {
      process.stderr.write(`agentvisor: ${error.message.split('\n')[0]}\n`)
      return ExitCode.usage
    }
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error)
    process.stderr.write(`agentvisor: internal error: ${message}\n`)
    return ExitCode.failed
  }
}
