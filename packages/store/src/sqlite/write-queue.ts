import type BetterSqlite3 from 'better-sqlite3'
import type { Kysely } from 'kysely'
import type { Database } from '../database.js'
import type { GroupWrite } from '../run-writer/run-write.js'
import type { CommitOutcome } from './batch-commit.js'
import { startCheckpointer } from './checkpointer.js'
import { commitThreadScript, startCommitThread } from './commit-thread.js'
import { encodeGroup } from './commit-wire.js'
import { type GroupCommitLimits, type GroupCommits, groupCommits, type ThreadCommitter } from './group-commit.js'
import { BUSY_TIMEOUT_MS } from './sqlite-reader.js'

/**
 * A group commit of this many commits goes to the commit thread (commit-thread.ts) rather than
 * being made on the main thread: below it, the hand-over costs about what it saves. Once the
 * thread runs, the queue is handed over as soon as 64 commits are queued, without waiting for
 * the end of the event loop's turn: the thread commits them while the main thread goes on with
 * the runs of the same turn, and the first runs' next steps are ready when it is done.
 */
const GROUP_COMMIT_LIMITS: GroupCommitLimits = { threadMinBatch: 16, threadChunk: 64 }

/** Where a SQLite run writer's writes run (`sqliteWriteQueue`). */
export interface SqliteWriteQueue extends Pick<GroupCommits, 'enqueue' | 'whenFree'> {
  /** Settles what the commit thread has, then stops the checkpointer. */
  readonly close: () => Promise<void>
}

/**
 * The background of a SQLite run writer on `sqlite` (the store's connection under `db`): its
 * group commits (`commitHere` on this thread, or on the commit thread when the file has one,
 * docs/durability.md, "Group commit"), and its checkpoints, moved off the hot path into a worker
 * thread (checkpointer.ts). Kysely keeps a transaction open across awaits (an approval decision, a
 * migration): a write issued meanwhile waits for Kysely's connection lock, held until that
 * transaction ends, and then runs.
 */
export function sqliteWriteQueue(
  db: Kysely<Database>,
  sqlite: BetterSqlite3.Database,
  commitHere: (batch: ReadonlyArray<GroupWrite>) => CommitOutcome[]
): SqliteWriteQueue {
  const onDisk = sqlite.name !== '' && sqlite.name !== ':memory:' && !sqlite.memory
  const checkpointer = onDisk ? startCheckpointer(sqlite.name) : undefined
  if (checkpointer !== undefined) sqlite.pragma('wal_autocheckpoint = 0')
  // Found now, so that a store whose thread could not start fails at once (CommitThreadMissing).
  const script = onDisk ? commitThreadScript() : undefined
  // The thread costs ~20 MB of the process's memory: it is started by the first group commit
  // large enough for it (docs/durability.md, "Group commit"), never for a process that drives
  // one run at a time.
  const startThread = (): ThreadCommitter | undefined => {
    if (script === undefined) return undefined
    const thread = startCommitThread(script, { file: sqlite.name, busyTimeoutMs: BUSY_TIMEOUT_MS })
    return { ...thread, commit: (batch) => thread.commit(encodeGroup(batch)) }
  }
  const { enqueue, whenFree, close } = groupCommits(
    {
      commitHere,
      startThread,
      whenConnectionFree: (f) => (sqlite.inTransaction ? db.connection().execute(async () => f()) : f())
    },
    GROUP_COMMIT_LIMITS
  )
  return {
    enqueue,
    whenFree,
    close: async () => {
      // What the commit thread has settles first: its runs wait on it.
      await close()
      if (checkpointer === undefined) return
      await checkpointer.stop()
      if (sqlite.open) sqlite.pragma('wal_autocheckpoint = 1000')
    }
  }
}
