// A narrow entry (`@agentvisor/store/open`): opening the store, without the repositories the
// index also re-exports. The CLI's read commands start up on this and `./runs` alone.
export { openStore, type OpenStoreOptions, type Store } from './open-store.js'
export { resolveDbPath, DB_ENV_VAR } from './resolve-db-path.js'
export { StoreError } from './errors.js'
