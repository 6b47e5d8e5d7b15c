// The narrow entry: `agentvisor runs` must not load every repository of the store's index.
import { openStore, type Store } from '@agentvisor/store/open'
import { existingStorePath } from './store-path.js'

/** Opens the store named by `--db`, `$AGENTVISOR_DB` or the default under the cwd; it must exist. */
export const openCliStore = (flag: string | undefined): Promise<Store> => openStore(existingStorePath(flag))

/** The same store, opened read-only for a command that only reads (docs/cli.md, "Read-only stores"). */
export const openCliReader = (flag: string | undefined): Promise<Store> => openStore(existingStorePath(flag), { readOnly: true })
