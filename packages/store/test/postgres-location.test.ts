import { describe, expect, it } from 'vitest'
// Internal module: not part of the package's exports, so it is imported from its source.
import { isPostgresUrl, redactPassword } from '../src/postgres/postgres-location.js'

describe('PostgreSQL locations', () => {
  it('recognises postgres:// and postgresql:// URLs, in any case, and nothing else', () => {
    expect(isPostgresUrl('postgres://db/runs')).toBe(true)
    expect(isPostgresUrl('postgresql://app@db/runs')).toBe(true)
    expect(isPostgresUrl('POSTGRES://db/runs')).toBe(true)
    expect(isPostgresUrl('/srv/postgres://x')).toBe(false)
    expect(isPostgresUrl('postgres.db')).toBe(false)
    expect(isPostgresUrl(':memory:')).toBe(false)
  })

  it('shows the password as *** and keeps the rest of the URL as written', () => {
    expect(redactPassword('postgres://app:s3cret@db:5432/runs?sslmode=require')).toBe('postgres://app:***@db:5432/runs?sslmode=require')
    expect(redactPassword('postgresql://app:p%40ss@db/runs')).toBe('postgresql://app:***@db/runs')
  })

  it('hides a password given as a query parameter too', () => {
    expect(redactPassword('postgres://app@db/runs?password=s3cret&sslmode=require')).toBe('postgres://app@db/runs?password=***&sslmode=require')
  })

  it('leaves a URL without a password as it is', () => {
    expect(redactPassword('postgres://app@db/runs')).toBe('postgres://app@db/runs')
    expect(redactPassword('postgres://db:5432/runs')).toBe('postgres://db:5432/runs')
    expect(redactPassword('postgres://app@/runs?host=/var/run/postgresql')).toBe('postgres://app@/runs?host=/var/run/postgresql')
  })

  it('hides all of a password with a raw @ in it, even in a URL too broken to parse', () => {
    expect(redactPassword('postgres://app:a@b:c@db/runs')).toBe('postgres://app:***@db/runs')
  })
})
