/** Server URLs without user-info, and the credentials that user-info carried. */
export interface NatsUrlAuth {
  readonly servers: ReadonlyArray<string>
  readonly user?: string | undefined
  readonly pass?: string | undefined
  readonly token?: string | undefined
}

const decode = (text: string): string => {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/**
 * Splits the credentials out of NATS server URLs: `nats://user:password@host` is a user and a
 * password, `nats://token@host` a token, as other NATS clients read them. nats.js ignores
 * user-info (it would connect without credentials and be refused), so they are handed to it as
 * options, and the URLs without them (docs/nats.md). The first URL with user-info is used:
 * one connection authenticates one way.
 *
 * @example
 * natsUrlAuth('nats://svc:s3cret@10.0.0.5:4222') // { servers: ['nats://10.0.0.5:4222'], user: 'svc', pass: 's3cret' }
 */
export const natsUrlAuth = (servers: string | readonly string[]): NatsUrlAuth => {
  let auth: Omit<NatsUrlAuth, 'servers'> | undefined
  const bare = [servers].flat().map((server) => {
    const schemeEnd = server.indexOf('://')
    const start = schemeEnd === -1 ? 0 : schemeEnd + 3
    // The user-info ends at the last `@`: a password may hold a raw one.
    const at = server.lastIndexOf('@')
    if (at < start) return server
    const userInfo = server.slice(start, at)
    const colon = userInfo.indexOf(':')
    auth ??= colon === -1 ? { token: decode(userInfo) } : { user: decode(userInfo.slice(0, colon)), pass: decode(userInfo.slice(colon + 1)) }
    return `${server.slice(0, start)}${server.slice(at + 1)}`
  })
  return { servers: bare, ...auth }
}
