import { CompiledQuery, SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver, type SqliteDialectConfig } from 'kysely'

/**
 * Kysely's SQLite dialect, except that transactions start with `BEGIN IMMEDIATE`.
 *
 * A plain `BEGIN` takes the write lock only at the first write. When another process (a worker,
 * `agentvisor approve`) has written in between, SQLite cannot upgrade the read snapshot and
 * fails at once with SQLITE_BUSY, without waiting out `busy_timeout`. Taking the write lock up
 * front makes a concurrent writer wait its turn instead. The store's transactions all write, so
 * nothing is lost by it.
 */
export class ImmediateSqliteDialect extends SqliteDialect {
  readonly #config: SqliteDialectConfig

  constructor(config: SqliteDialectConfig) {
    super(config)
    this.#config = config
  }

  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.#config)
  }
}

class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'))
  }
}
