import { defineConfig } from 'vitest/config'

// Tests import workspace packages from their TypeScript sources (the `source` export condition),
// so a test run never depends on a stale build; the CLI tests spawn the built bin instead.
export default defineConfig({
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'] } },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    globalSetup: ['test/setup/nats-server.ts', 'test/setup/postgres.ts']
  }
})
