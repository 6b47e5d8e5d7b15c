// The PostgreSQL server of the bench's scenarios and A/Bs: the one the test suite starts
// (scripts/postgres-server.mjs), with what the bench's figures need of a production server:
// fsync and full-page writes on, the C collation, `synchronous_commit` as asked. Tethered: it
// ends with the bench, even a killed one. Apart from the scenarios so that a script can start one
// without LangGraph's packages installed (layout-ab.mjs).
import pg from 'pg'
import { startPostgresServer } from '../scripts/postgres-server.mjs'

const { spawnTethered } = await import(new URL('../packages/cli/dist/index.js', import.meta.url).href)

/**
 * A fresh PostgreSQL on 127.0.0.1: `{ url(name), createDatabase(), dropDatabase(name), stop() }`.
 * `url(name)` is a superuser URL of database `name`. `synchronousCommit`: the server's
 * `synchronous_commit`, `off` for the scenarios (see scenarios/postgres.mjs), `on` (PostgreSQL's
 * default) where a figure is of a commit that waits for its WAL flush.
 */
export const startPostgres = async ({ synchronousCommit = 'off' } = {}) => {
  const server = await startPostgresServer({ durable: true, synchronousCommit, collation: 'c', maxConnections: 200, spawn: spawnTethered })
  const admin = new pg.Pool({ connectionString: server.url(), max: 1 })
  admin.on('error', () => undefined)
  let databases = 0
  return {
    url: server.url,
    createDatabase: async () => {
      const name = `bench_${++databases}`
      await admin.query(`create database "${name}"`)
      return name
    },
    dropDatabase: (name) => admin.query(`drop database if exists "${name}" with (force)`),
    stop: async () => {
      await admin.end()
      await server.remove()
    }
  }
}
