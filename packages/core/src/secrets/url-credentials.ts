// A URL in running text: its scheme, then everything up to whitespace or the next URL of a
// comma-separated list (a NATS cluster). The authority is not cut at `/`, `?` or `#`: a raw one
// in a password would otherwise leave the password's head outside the user-info. Schemes are
// bounded in length so that a long run of letters costs linear time, not quadratic.
const URL_IN_TEXT = /\b([a-z][a-z0-9+.-]{0,31}:\/\/)((?:(?!,[a-z][a-z0-9+.-]{0,31}:\/\/)\S)*)/gi

// Schemes whose bare user-info (`nats://TOKEN@host`) is a token, not a user name.
const TOKEN_SCHEMES = new Set(['nats://', 'tls://', 'ws://', 'wss://'])

const MASK = '***'

const maskOne = (scheme: string, rest: string): string => {
  let masked = rest
  // The user-info ends at the last `@`: a raw `@` in a password would otherwise leak its tail.
  // It hides too much rather than too little when a later `@` belongs to a path or query.
  const at = rest.lastIndexOf('@')
  if (at > 0) {
    const userInfo = rest.slice(0, at)
    const colon = userInfo.indexOf(':')
    if (colon !== -1) masked = `${userInfo.slice(0, colon)}:${MASK}${rest.slice(at)}`
    else if (TOKEN_SCHEMES.has(scheme.toLowerCase())) masked = `${MASK}${rest.slice(at)}`
  }
  // `password=` in a query (libpq and `pg` honour it).
  return masked.replace(/([?&]password=)[^&#\s]*/gi, `$1${MASK}`)
}

/**
 * `text` with the credentials of every URL in it shown as `***`: the password of
 * `scheme://user:password@host`, a NATS token (`nats://token@host`) and a `password=` query
 * parameter. For anything printed, logged, served or carried by an error: a store location, a
 * NATS server list, a message quoting either (docs/deploy.md, docs/nats.md). It works on the raw
 * text, so a URL too broken to parse is masked too.
 *
 * @example
 * maskUrlCredentials('cannot connect to NATS at nats://svc:s3cret@10.0.0.5:4222') // 'cannot connect to NATS at nats://svc:***@10.0.0.5:4222'
 * maskUrlCredentials('postgres://app:s3cret@db:5432/runs') // 'postgres://app:***@db:5432/runs'
 */
export const maskUrlCredentials = (text: string): string =>
  // The fast path: most texts hold no URL at all.
  text.includes('://') ? text.replace(URL_IN_TEXT, (_, scheme: string, rest: string) => `${scheme}${maskOne(scheme, rest)}`) : text
