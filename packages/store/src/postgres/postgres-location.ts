/**
 * Whether a store location names a PostgreSQL server (`postgres://` or `postgresql://`, in any
 * case) rather than a SQLite file.
 */
export const isPostgresUrl = (location: string): boolean => /^postgres(?:ql)?:\/\//i.test(location)

/**
 * The URL with its password shown as `***`, for messages, logs and `Store.file`: anything the
 * CLI prints, the inspector serves or an error carries. It works on the raw text, so a URL too
 * broken to parse is redacted as well, and it rather hides too much than too little: the
 * user-info ends at the last `@` (a raw `@` in a password would otherwise leak its tail), and a
 * `password=` query parameter (which `pg` honours) is hidden too.
 *
 * @example redactPassword('postgres://app:s3cret@db:5432/runs') // 'postgres://app:***@db:5432/runs'
 */
export function redactPassword(url: string): string {
  const schemeEnd = url.indexOf('://') + 3
  let redacted = url
  const at = url.lastIndexOf('@')
  if (schemeEnd >= 3 && at > schemeEnd) {
    const userInfo = url.slice(schemeEnd, at)
    const colon = userInfo.indexOf(':')
    if (colon !== -1) redacted = `${url.slice(0, schemeEnd)}${userInfo.slice(0, colon)}:***${url.slice(at)}`
  }
  return redacted.replace(/([?&]password=)[^&#]*/gi, '$1***')
}
