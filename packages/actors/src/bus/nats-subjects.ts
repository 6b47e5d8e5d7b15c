/** The subject prefix of docs/nats.md. */
export const DEFAULT_SUBJECT_PREFIX = 'agentvisor'

/** The subjects of docs/nats.md under a prefix (several installations, or test runs, on one NATS account). */
export interface NatsSubjects {
  readonly start: string
  readonly submit: string
  readonly events: (runId: string) => string
  readonly done: (runId: string) => string
  readonly stream: (runId: string) => string
  readonly started: (runId: string) => string
  readonly anyStarted: string
  readonly requests: string
  readonly anyDone: string
  readonly control: (runId: string, verb: string) => string
  readonly anyControl: string
}

/**
 * The bus subjects under `prefix`; with the default prefix they are exactly `Subjects` of
 * messages.ts (a test holds them equal).
 */
export const natsSubjects = (prefix: string = DEFAULT_SUBJECT_PREFIX): NatsSubjects => ({
  start: `${prefix}.runs.start`,
  submit: `${prefix}.runs.submit`,
  events: (runId) => `${prefix}.runs.${runId}.events`,
  done: (runId) => `${prefix}.runs.${runId}.done`,
  stream: (runId) => `${prefix}.runs.${runId}.stream`,
  started: (runId) => `${prefix}.runs.${runId}.started`,
  anyStarted: `${prefix}.runs.*.started`,
  requests: `${prefix}.requests`,
  anyDone: `${prefix}.runs.*.done`,
  control: (runId, verb) => `${prefix}.control.${runId}.${verb}`,
  anyControl: `${prefix}.control.*.*`
})

/** A run id or verb that fits in one subject token (no dots, wildcards or whitespace). */
export const isSubjectToken = (token: string): boolean => /^[^.*>\s]+$/.test(token)

/** The run id and verb of a control subject: its last two tokens, whatever the prefix. */
export const controlTarget = (subject: string): { readonly runId: string; readonly verb: string } => {
  const tokens = subject.split('.')
  return { runId: tokens[tokens.length - 2] ?? '', verb: tokens[tokens.length - 1] ?? '' }
}
