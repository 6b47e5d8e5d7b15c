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
