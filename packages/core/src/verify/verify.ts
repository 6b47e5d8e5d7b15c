import { Effect } from 'effect'
import type { VerifySpec } from '../contract/contract-fields.js'
import { WorkspaceEscapeError } from '../errors.js'
import { commandEnv, type CommandSettings } from '../tools/command-env.js'
import { readInsideNow } from '../tools/confined-fs.js'
import { runCommand } from '../tools/exec.js'
import type { Eventually, PinnedRead } from '../tools/pinned-fs.js'
import { describeFsError, fsErrorCode } from '../tools/tool-outcome.js'
import type { Workspace } from '../tools/workspace.js'

/** Whether the contract's check passed, and a short sentence saying why, fed back to the model. */
export interface VerifyResult {
  readonly passed: boolean
  readonly detail: string
}

const VERIFY_COMMAND_TIMEOUT_MS = 120_000
/** How much of a failing command's output the detail quotes: enough to see the error, not the whole log. */
const OUTPUT_TAIL_CHARS = 1_000
const QUOTE_MAX_CHARS = 80

const pass = (detail: string): VerifyResult => ({ passed: true, detail })
const fail = (detail: string): VerifyResult => ({ passed: false, detail })

/** JSON quoting shows newlines and quotes unambiguously; long texts are shortened for the sentence. */
const quote = (text: string): string => {
  const quoted = JSON.stringify(text)
  return quoted.length > QUOTE_MAX_CHARS ? `${quoted.slice(0, QUOTE_MAX_CHARS - 4)}..."` : quoted
}

type Confined = { readonly text: string } | { readonly failure: VerifyResult }

/** What a confined read found, as the text to check or the failure to report. */
const foundText = (file: string, found: PinnedRead): Confined => {
  if (found.kind === 'file') return { text: found.head.toString('utf8') }
  if (found.kind === 'folder') return { failure: fail(`${file} is a folder, not a file`) }
  if (found.kind === 'special') return { failure: fail(`${file} cannot be read: it is not a regular file`) }
  return { failure: fail(`${file} does not exist`) }
}

/** What a confined read threw (an escape, or an I/O error), as the failure to report. */
const readFailure = (file: string, cause: unknown): Confined => {
  if (cause instanceof WorkspaceEscapeError) return { failure: fail(cause.message) }
  const code = fsErrorCode(cause)
  return { failure: fail(code === 'ENOENT' || code === 'ENOTDIR' ? `${file} does not exist` : `${file} cannot be read: ${describeFsError(cause)}`) }
}

/**
 * The file's text, or the sentence explaining why it could not be read (escape included). Read
 * through pinned folders like `read_file` (docs/task-file.md), so a symlink swapped in after the
 * check cannot make the check read a file outside. At once (a missing file is an answer, not an
 * exception), unless the file is past 1 MiB: then read through the thread pool (pinned-fs.ts).
 */
const readConfined = (ws: Workspace, file: string): Eventually<Confined> => {
  let found: Eventually<PinnedRead>
  try {
    found = readInsideNow(ws, file, undefined)
  } catch (cause) {
    return readFailure(file, cause)
  }
  if (!(found instanceof Promise)) return foundText(file, found)
  return found.then(
    (read) => foundText(file, read),
    (cause: unknown) => readFailure(file, cause)
  )
}

/** A result now, or an Effect of it: a file check answers at once, a command (or a large file) later. */
export type VerifyNow = VerifyResult | Effect.Effect<VerifyResult>

/** The check of a file read by `readConfined`: at once when the read was. */
const checkFile = (ws: Workspace, file: string, judge: (text: string) => VerifyResult): VerifyNow => {
  const judged = (read: Confined): VerifyResult => ('failure' in read ? read.failure : judge(read.text))
  const read = readConfined(ws, file)
  // The promise never rejects: readConfined turns every failure into a result.
  return read instanceof Promise ? Effect.promise(() => read.then(judged)) : judged(read)
}

/** Where two texts first differ, phrased for the model; the most common near-miss named outright. */
const describeDifference = (actual: string, expected: string): string => {
  if (actual === `${expected}\n`) return 'it has an extra trailing newline'
  if (`${actual}\n` === expected) return 'it lacks the trailing newline'
  let index = 0
  while (index < actual.length && index < expected.length && actual[index] === expected[index]) index += 1
  if (index === actual.length) return `it is shorter: it ends after ${actual.length} characters`
  if (index === expected.length) return `it is longer: it has more than the expected ${expected.length} characters`
  return `they first differ at character ${index + 1}`
}

const tail = (text: string): string => {
  const trimmed = text.trim()
  return trimmed.length > OUTPUT_TAIL_CHARS ? `...${trimmed.slice(-OUTPUT_TAIL_CHARS)}` : trimmed
}

const verifyCommand = (ws: Workspace, run: string, expected: number, settings: CommandSettings): Effect.Effect<VerifyResult> =>
  runCommand({ command: run, cwd: ws.root, timeoutMs: VERIFY_COMMAND_TIMEOUT_MS, env: settings.env ?? commandEnv(), sandbox: settings.sandbox }).pipe(
    Effect.map((result) => {
      const shown = `\`${run}\``
      if (result.timedOut) return fail(`${shown} timed out after ${VERIFY_COMMAND_TIMEOUT_MS / 1000} s`)
      if (result.exitCode === expected) return pass(`${shown} exited with ${expected}`)
      const ending = result.exitCode === null ? `was killed by ${result.signal ?? 'an unknown cause'}` : `exited with ${result.exitCode}`
      const output = tail(`${result.stdout}\n${result.stderr}`)
      return fail(`${shown} ${ending} (expected ${expected})${output === '' ? '' : `; output:\n${output}`}`)
    })
  )

/**
 * Checks a contract's `verify` spec against the workspace (docs/task-file.md, "verify"); a
 * `command` runs with `settings`, like `exec`: the same environment and sandbox. Never fails:
 * every problem, a path escaping the workspace included, is a failed result whose `detail`
 * tells the model what is wrong, e.g. `out.txt does not contain "DONE"`.
 *
 * - `fileContains`: the file exists and contains the text.
 * - `fileEquals`: the file's content is exactly the text (no newline leniency).
 * - `command`: the command, run in the workspace root (120 s timeout), exits with `exitCode` (0).
 * - `allOf`: every check passes, in order; the detail is the first failure's.
 */
export const verify = (ws: Workspace, spec: VerifySpec, settings: CommandSettings = {}): Effect.Effect<VerifyResult> =>
  Effect.suspend(() => later(verifyNow(ws, spec, settings)))

/**
 * `verify` answered at once when it can: file checks (`fileContains`, `fileEquals`, an `allOf`
 * of them) give their result as a plain value, with no Effect to run, since they only make a few
 * synchronous system calls; a `command`, and a file past 1 MiB, give an Effect. The run driver
 * takes either (docs/architecture.md, "The hot path"). The check runs when this is called.
 */
export const verifyNow = (ws: Workspace, spec: VerifySpec, settings: CommandSettings = {}): VerifyNow => {
  if ('fileContains' in spec) {
    const { path, text } = spec.fileContains
    return checkFile(ws, path, (content) =>
      content.includes(text) ? pass(`${path} contains ${quote(text)}`) : fail(`${path} does not contain ${quote(text)}`)
    )
  }
  if ('fileEquals' in spec) {
    const { path, text } = spec.fileEquals
    return checkFile(ws, path, (content) =>
      content === text
        ? pass(`${path} has exactly the expected content`)
        : fail(`${path} does not have the expected content: ${describeDifference(content, text)}`)
    )
  }
  if ('command' in spec) return verifyCommand(ws, spec.command.run, spec.command.exitCode ?? 0, settings)
  return allOf(ws, spec.allOf, 0, settings)
}

/** `result` as an Effect. */
const later = (result: VerifyNow): Effect.Effect<VerifyResult> => (Effect.isEffect(result) ? result : Effect.succeed(result))

/** The checks from `from` on, in order, stopping at the first failure; at once while each answers at once. */
const allOf = (ws: Workspace, checks: ReadonlyArray<VerifySpec>, from: number, settings: CommandSettings): VerifyNow => {
  for (let i = from; i < checks.length; i++) {
    const result = verifyNow(ws, checks[i]!, settings)
    if (Effect.isEffect(result)) return Effect.flatMap(result, (done) => (done.passed ? later(allOf(ws, checks, i + 1, settings)) : Effect.succeed(done)))
    if (!result.passed) return result
  }
  return pass(checks.length === 1 ? 'the check passed' : `all ${checks.length} checks passed`)
}

/**
 * Whether checking `spec` may change anything: a `command` runs a process; file checks only
 * read. A pure check can be committed together with the transitions around it.
 */
export const verifyRunsCommands = (spec: VerifySpec): boolean => ('command' in spec ? true : 'allOf' in spec ? spec.allOf.some(verifyRunsCommands) : false)
