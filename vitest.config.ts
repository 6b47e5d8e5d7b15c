import { defineConfig } from 'vitest/config'

// Tests import workspace packages from their TypeScript sources (the `source` export condition),
// so a test run never depends on a stale build; the CLI tests spawn the built bin instead.
export default defineConfig({
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'] } },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    // A timeout here only catches a hang; it must never be what decides a verdict. On a loaded
    // 2-core machine (a second suite beside this one) the slowest tests took 28-38 s where they take
    // 8-14 s alone, and 30 s failed them; docs/development.md, "A loaded machine".
    testTimeout: 300_000,
    hookTimeout: 180_000,
    pool: 'forks',
    // Vitest's default in a run is one worker fewer than the cores: one file at a time on a 2-core
    // machine, where one file's worker and the CLI processes it spawns use ~1.2 cores. Two files at
    // once took the heaviest 8 files from 206 s to 162 s on an idle 2-core machine, every test as
    // green (docs/development.md, "A loaded machine").
    maxWorkers: 2,
    globalSetup: ['test/setup/nats-server.ts', 'test/setup/postgres.ts']
  }
})
