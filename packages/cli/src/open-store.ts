// The narrow entry: `agentvisor runs` must not load every repository of the store's index.
import { openStore, resolveDbPath, type Store } from '@agentvisor/store/open'

/** Opens the store named by `--db`, `$AGENTVISOR_DB` or the default under the cwd. */
export const openCliStore = (flag: string | undefined): Promise<Store> => openStore(resolveDbPath(flag))

/** The same store, opened read-only for a command that only reads (docs/cli.md, "Read-only stores"). */
export const openCliReader = (flag: string | undefined): Promise<Store> => openStore(resolveDbPath(flag), { readOnly: true })
