/** What an occurrence of a secret is replaced with (docs/task-file.md, "API keys"). */
export const REDACTED = '[redacted]'

// Shorter values would match ordinary text (and a one-letter "key" would shred every message).
const MIN_SECRET_LENGTH = 4

const urlForms = (value: string): ReadonlyArray<string> => {
  try {
    const encoded = encodeURIComponent(value)
    // Upper-case hex is the norm, lower-case is legal and some servers echo it that way.
    return [encoded, encoded.replaceAll('%20', '+'), encoded.replace(/%[0-9A-F]{2}/g, (hex) => hex.toLowerCase())]
  } catch {
    // A lone surrogate cannot be URL-encoded, so no server can echo it that way either.
    return []
  }
}

/**
 * The forms a server, an SDK or a command can echo a secret in, longest first. Only the
 * trimmed value's forms are needed: fetch strips a header value's surrounding whitespace before
 * sending it (so servers echo the trimmed key), and every form of the raw value contains the
 * same form of the trimmed one, so replacing the latter leaves nothing of either. A prefix such
 * as `Bearer ` or `x-api-key: ` is left in place with the key after it replaced.
 */
export const secretForms = (value: string): ReadonlyArray<string> => {
  const trimmed = value.trim()
  if (trimmed.length < MIN_SECRET_LENGTH) return []
  const json = JSON.stringify(trimmed).slice(1, -1)
  const forms = new Set([
    trimmed,
    // A JSON string: a body, a JSON log line, a tool result that serialised its input.
    json,
    // Some encoders (PHP's, several loggers) also escape `/`.
    json.replaceAll('/', '\\/'),
    // A query string or a form body.
    ...urlForms(trimmed)
  ])
  return [...forms].sort((a, b) => b.length - a.length)
}

/**
 * The secret values a process must never show: the API keys its providers send. `redact` is
 * what every text coming from a provider or a tool goes through before it is stored, published
 * or printed, so every sink downstream is clean (docs/task-file.md, "API keys").
 *
 * Cheap on the hot path: with no secrets it returns at once; otherwise one `includes` per form
 * (usually one or two) for text that holds none.
 *
 * @example
 * const secrets = makeSecretSet(['sk-live-123\n'])
 * secrets.redact('401: Incorrect API key: Bearer sk-live-123') // '401: Incorrect API key: Bearer [redacted]'
 */
export interface SecretSet {
  /** Adds a value (and its echoed forms); `undefined` and values too short to be a key are ignored. */
  add(value: string | undefined): void
  /** `text` with every form of every secret replaced by `[redacted]`. */
  redact(text: string): string
  /** Whether any secret is known: when not, nothing needs redacting. */
  readonly isEmpty: boolean
  /**
   * Whether some secret has a space or a line break in it: text redacted piece by piece must then
   * be held until it is whole, since no boundary between words is safe to cut at.
   */
  readonly hasWhitespace: boolean
}

/** A secret set holding `values` (more can be added: a key read later, or rotated). */
export const makeSecretSet = (values: Iterable<string | undefined> = []): SecretSet => {
  const seen = new Set<string>()
  let forms: string[] = []
  const set: SecretSet = {
    add: (value) => {
      if (value === undefined || seen.has(value)) return
      seen.add(value)
      const added = secretForms(value).filter((form) => !forms.includes(form))
      // Longest first across all secrets: a key that contains another is replaced whole.
      if (added.length > 0) forms = [...forms, ...added].sort((a, b) => b.length - a.length)
    },
    redact: (text) => {
      let out = text
      for (const form of forms) if (out.includes(form)) out = out.replaceAll(form, REDACTED)
      return out
    },
    get isEmpty() {
      return forms.length === 0
    },
    get hasWhitespace() {
      return forms.some((form) => /\s/.test(form))
    }
  }
  for (const value of values) set.add(value)
  return set
}
