import type { Kysely, Transaction } from 'kysely'
import type { Database } from './database.js'

/**
 * What every repository function runs its query on: the store's `Kysely` or a transaction of
 * it, so a caller can group writes (a transition and its step data) into one commit.
 */
export type Executor = Kysely<Database> | Transaction<Database>
