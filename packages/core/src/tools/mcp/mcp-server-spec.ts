import * as path from 'node:path'
import { Either, ParseResult, Schema } from 'effect'
import { HttpUrl } from '../../contract/contract-fields.js'
import { McpServerError, mcpServerLabel } from './mcp-errors.js'

/*
 * What a task file writes under `mcpServers` (docs/tools.md, "MCP servers"): a stdio server
 * (`command`, `args`, `env`, `cwd`) or a Streamable HTTP one (`url`, `headers`), each value of
 * `env` and `headers` plain text or `{ "fromEnv": "NAME" }`. Only the names of `fromEnv`
 * variables are ever kept; their values are read when the server starts.
 */

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
const EnvName = Schema.String.pipe(Schema.filter((s) => ENV_NAME.test(s) || 'must be an environment variable name (letters, digits and _)'))

/** `{ "fromEnv": "NAME" }`: a value read from the environment when the server starts, never stored, logged or shown. */
export const SecretRef = Schema.Struct({ fromEnv: EnvName })
export type SecretRef = typeof SecretRef.Type

/** A value of a server's `env` or `headers`: plain text, or a secret read from the environment. */
export const McpValue = Schema.Union(Schema.String, SecretRef)
export type McpValue = typeof McpValue.Type

const NonBlank = Schema.String.pipe(Schema.filter((s) => s.trim() !== '' || 'must have non-space text'))

// RFC 9110's token: what fetch accepts as a header name.
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/**
 * Values by name, each name checked here rather than by the record's key schema: a key that
 * fails that is reported as an unexpected field, which would not say what is wrong with it.
 */
const NamedValues = (name: RegExp, wrong: string) =>
  Schema.Record({ key: Schema.String, value: McpValue }).pipe(
    Schema.filter((values) => {
      for (const key of Object.keys(values)) if (!name.test(key)) return { path: [key], message: wrong }
      return undefined
    })
  )

/** A server run as a child process, spoken to over its stdin and stdout. */
export const McpStdioServerSpec = Schema.Struct({
  command: NonBlank,
  args: Schema.optional(Schema.Array(Schema.String)),
  /** Added to the few variables a server inherits (PATH, HOME, ...); nothing else of ours reaches it. */
  env: Schema.optional(NamedValues(ENV_NAME, 'is not an environment variable name (letters, digits and _)')),
  /** Relative to the task file's folder; that folder when omitted. */
  cwd: Schema.optional(NonBlank)
})
export type McpStdioServerSpec = typeof McpStdioServerSpec.Type

/** A server reached over Streamable HTTP. */
export const McpHttpServerSpec = Schema.Struct({
  url: HttpUrl,
  headers: Schema.optional(NamedValues(HEADER_NAME, 'is not an HTTP header name'))
})
export type McpHttpServerSpec = typeof McpHttpServerSpec.Type

export type McpServerSpec = McpStdioServerSpec | McpHttpServerSpec
type McpServerSpecEncoded = typeof McpStdioServerSpec.Encoded | typeof McpHttpServerSpec.Encoded

/** An object with `url` and no `command` is an HTTP server; anything else is read as a stdio one. */
const looksHttp = (input: unknown): boolean => typeof input === 'object' && input !== null && 'url' in input && !('command' in input)

/**
 * One MCP server as a task file writes it: stdio (`command`) or Streamable HTTP (`url`). The
 * kind is picked by which of the two fields is there and only that kind's struct decodes it,
 * so a mistake is reported once, against the kind meant (`url: must be an http:// or https://
 * URL`, `env: is unexpected`), where a plain union would also report every field of the other
 * kind. Decoding options pass through: with `onExcessProperty: 'error'`, a field of the other
 * kind (`env` beside `url`) is refused rather than dropped.
 */
export const McpServerSpec: Schema.Schema<McpServerSpec, McpServerSpecEncoded> = Schema.declare<
  McpServerSpec,
  McpServerSpecEncoded,
  readonly [typeof McpStdioServerSpec, typeof McpHttpServerSpec]
>([McpStdioServerSpec, McpHttpServerSpec], {
  decode: (stdio, http) => (input, options) =>
    looksHttp(input) ? ParseResult.decodeUnknown(http)(input, options) : ParseResult.decodeUnknown(stdio)(input, options),
  encode: (stdio, http) => (input, options) =>
    looksHttp(input) ? ParseResult.encodeUnknown(http)(input, options) : ParseResult.encodeUnknown(stdio)(input, options)
}).annotations({ identifier: 'McpServerSpec', description: 'an MCP server: { command, args?, env?, cwd? } or { url, headers? }' })

/** What a server name must match: it becomes the head of its tools' names (`<server>__<tool>`). */
export const MCP_SERVER_NAME = /^[a-zA-Z0-9_-]+$/

/** The longest server name whose tools can still be named: a catalogue name is at most 64 characters. */
export const MCP_SERVER_NAME_MAX = 61

/** `mcpServers`: the servers by name, each name checked as `MCP_SERVER_NAME` says. */
export const McpServers = Schema.Record({ key: Schema.String, value: McpServerSpec }).pipe(
  Schema.filter((servers) => {
    for (const name of Object.keys(servers)) {
      if (!MCP_SERVER_NAME.test(name)) return { path: [name], message: 'is not a valid server name (use letters, digits, _ and -)' }
      if (name.length > MCP_SERVER_NAME_MAX) {
        return { path: [name], message: `is longer than ${MCP_SERVER_NAME_MAX} characters (its tools are named <server>__<tool>, at most 64)` }
      }
    }
    return undefined
  })
)
export type McpServers = typeof McpServers.Type

/** Whether a server is reached over HTTP rather than run as a child process. */
export const isHttpServer = (spec: McpServerSpec): spec is McpHttpServerSpec => 'url' in spec

/**
 * The environment variables `fromEnv` values name, across all `servers`: a run hands them to
 * `runCommandSettings` so that `exec` never sees them.
 */
export const mcpSecretNames = (servers: McpServers | undefined): string[] => {
  const names = new Set<string>()
  for (const spec of Object.values(servers ?? {})) {
    const values = isHttpServer(spec) ? spec.headers : spec.env
    for (const value of Object.values(values ?? {})) if (typeof value !== 'string') names.add(value.fromEnv)
  }
  return [...names]
}

/** A stdio server with its values read: what is spawned. */
export interface ResolvedStdioServer {
  readonly kind: 'stdio'
  readonly command: string
  readonly args: ReadonlyArray<string>
  /** Only the spec's own variables; the inherited ones are added at spawn. */
  readonly env: Readonly<Record<string, string>>
  /** Absolute. */
  readonly cwd: string
}

/** An HTTP server with its values read: what is connected to. */
export interface ResolvedHttpServer {
  readonly kind: 'http'
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
}

/** A server spec with every `fromEnv` read, and the values read (to be redacted). */
export interface ResolvedMcpServer {
  readonly launch: ResolvedStdioServer | ResolvedHttpServer
  readonly secrets: ReadonlyArray<string>
}

/**
 * `spec` with its `fromEnv` values read from `env` and its `cwd` made absolute against `baseDir`,
 * or an error naming the server and the first variable that is not set (never a value).
 */
export const resolveMcpServer = (
  server: string,
  spec: McpServerSpec,
  env: NodeJS.ProcessEnv,
  baseDir: string
): Either.Either<ResolvedMcpServer, McpServerError> => {
  const secrets: string[] = []
  const field = isHttpServer(spec) ? 'headers' : 'env'
  const resolved: Record<string, string> = {}
  for (const [name, value] of Object.entries((isHttpServer(spec) ? spec.headers : spec.env) ?? {})) {
    if (typeof value === 'string') {
      resolved[name] = value
      continue
    }
    const read = env[value.fromEnv]
    if (read === undefined) {
      return Either.left(
        new McpServerError({
          server,
          reason: 'config',
          message: `${mcpServerLabel(server)}: the environment variable ${value.fromEnv} is not set (${field}.${name} reads it with fromEnv)`
        })
      )
    }
    // fetch's own message for a bad header value quotes the value: it must never be built.
    if (field === 'headers' && /[\r\n\0]/.test(read.trim())) {
      return Either.left(
        new McpServerError({
          server,
          reason: 'config',
          message: `${mcpServerLabel(server)}: the environment variable ${value.fromEnv} holds a line break or NUL, which header ${name} cannot carry`
        })
      )
    }
    secrets.push(read)
    resolved[name] = read
  }
  if (isHttpServer(spec)) return Either.right({ launch: { kind: 'http', url: spec.url, headers: resolved }, secrets })
  return Either.right({
    launch: { kind: 'stdio', command: spec.command, args: spec.args ?? [], env: resolved, cwd: path.resolve(baseDir, spec.cwd ?? '.') },
    secrets
  })
}

/** JSON with object keys sorted, so that two equal specs give the same text whatever their key order. */
const canonical = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`
  }
  return JSON.stringify(value)
}

/**
 * The pool's key for a server: its name, its spec as written (so `fromEnv` names, never their
 * values) and, for a stdio server, the folder it runs in. The same server of two task files in
 * the same folder is one process.
 */
export const mcpServerKey = (server: string, spec: McpServerSpec, baseDir: string): string =>
  canonical({ server, spec, ...(isHttpServer(spec) ? {} : { cwd: path.resolve(baseDir, spec.cwd ?? '.') }) })
