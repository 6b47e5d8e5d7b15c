import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { resolveDbPath } from '@agentvisor/store'

const cwd = path.resolve('/srv/project')

describe('resolveDbPath', () => {
  it('prefers the --db flag over $AGENTVISOR_DB and the default', () => {
    expect(resolveDbPath('/data/flag.db', { AGENTVISOR_DB: '/data/env.db' }, cwd)).toBe(path.resolve('/data/flag.db'))
  })

  it('uses $AGENTVISOR_DB when no flag is given', () => {
    expect(resolveDbPath(undefined, { AGENTVISOR_DB: '/data/env.db' }, cwd)).toBe(path.resolve('/data/env.db'))
  })

  it('defaults to .agentvisor/agentvisor.db under the cwd', () => {
    expect(resolveDbPath(undefined, {}, cwd)).toBe(path.join(cwd, '.agentvisor', 'agentvisor.db'))
  })

  it('resolves a relative flag or variable against the cwd', () => {
    expect(resolveDbPath('runs.db', {}, cwd)).toBe(path.join(cwd, 'runs.db'))
    expect(resolveDbPath(undefined, { AGENTVISOR_DB: 'db/env.db' }, cwd)).toBe(path.join(cwd, 'db', 'env.db'))
  })

  it('treats an empty flag or variable as not given', () => {
    expect(resolveDbPath('', { AGENTVISOR_DB: '/data/env.db' }, cwd)).toBe(path.resolve('/data/env.db'))
    expect(resolveDbPath(undefined, { AGENTVISOR_DB: '' }, cwd)).toBe(path.join(cwd, '.agentvisor', 'agentvisor.db'))
  })

  it('keeps :memory: as is', () => {
    expect(resolveDbPath(':memory:', {}, cwd)).toBe(':memory:')
  })
})

describe('resolveDbPath with a PostgreSQL URL', () => {
  it('passes a postgres:// or postgresql:// flag through unchanged', () => {
    expect(resolveDbPath('postgres://app:s3cret@db.internal:5432/agentvisor', {}, cwd)).toBe('postgres://app:s3cret@db.internal:5432/agentvisor')
    expect(resolveDbPath('postgresql://db/agentvisor?sslmode=require', { AGENTVISOR_DB: '/data/env.db' }, cwd)).toBe(
      'postgresql://db/agentvisor?sslmode=require'
    )
  })

  it('passes a URL in $AGENTVISOR_DB through unchanged', () => {
    expect(resolveDbPath(undefined, { AGENTVISOR_DB: 'postgres://app@/agentvisor?host=/var/run/postgresql' }, cwd)).toBe(
      'postgres://app@/agentvisor?host=/var/run/postgresql'
    )
  })

  it('still resolves a file whose name merely starts like the scheme', () => {
    expect(resolveDbPath('postgres.db', {}, cwd)).toBe(path.join(cwd, 'postgres.db'))
  })
})
