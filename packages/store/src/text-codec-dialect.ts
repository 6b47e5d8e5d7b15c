import type { CompiledQuery, DatabaseConnection, Dialect, Driver, QueryCompiler, QueryResult, TransactionSettings } from 'kysely'
import { decodeRows, encodeParams } from './text-codec.js'

/**
 * `dialect`, with every query's text parameters encoded and every text value of its rows
 * decoded (see text-codec.ts): the one place where what Kysely sends and reads is escaped, for
 * every repository and on every dialect alike. The adapter, compiler and introspector are the
 * wrapped dialect's own, so `dialectOf` still tells the dialect by its adapter.
 */
export const withTextCodec = (dialect: Dialect): Dialect => ({
  createAdapter: () => dialect.createAdapter(),
  createDriver: () => new TextCodecDriver(dialect.createDriver()),
  createQueryCompiler: () => dialect.createQueryCompiler(),
  createIntrospector: (db) => dialect.createIntrospector(db)
})

const encodeQuery = (query: CompiledQuery): CompiledQuery => {
  const parameters = encodeParams(query.parameters)
  return parameters === query.parameters ? query : { ...query, parameters }
}

const decodeResult = <R>(result: QueryResult<R>): QueryResult<R> => {
  decodeRows(result.rows as R[])
  return result
}

/** A connection of the wrapped driver, seen through the codec. */
class TextCodecConnection implements DatabaseConnection {
  constructor(readonly inner: DatabaseConnection) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    return decodeResult(await this.inner.executeQuery<R>(encodeQuery(query)))
  }

  async *streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    for await (const result of this.inner.streamQuery<R>(encodeQuery(query), chunkSize)) yield decodeResult(result)
  }
}

/** The wrapped driver, handed its own connections back (PostgreSQL's releases one by a private method of it). */
class TextCodecDriver implements Driver {
  // One wrapper per connection, not one per acquisition: SQLite's driver hands out one connection.
  readonly #wrappers = new WeakMap<DatabaseConnection, TextCodecConnection>()

  constructor(readonly inner: Driver) {}

  init(): Promise<void> {
    return this.inner.init()
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const connection = await this.inner.acquireConnection()
    let wrapper = this.#wrappers.get(connection)
    if (wrapper === undefined) {
      wrapper = new TextCodecConnection(connection)
      this.#wrappers.set(connection, wrapper)
    }
    return wrapper
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    return this.inner.beginTransaction(unwrap(connection), settings)
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.inner.commitTransaction(unwrap(connection))
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    return this.inner.rollbackTransaction(unwrap(connection))
  }

  async savepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler['compileQuery']): Promise<void> {
    if (this.inner.savepoint === undefined) throw new Error('this dialect has no savepoints')
    return this.inner.savepoint(unwrap(connection), name, compile)
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler['compileQuery']): Promise<void> {
    if (this.inner.rollbackToSavepoint === undefined) throw new Error('this dialect has no savepoints')
    return this.inner.rollbackToSavepoint(unwrap(connection), name, compile)
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler['compileQuery']): Promise<void> {
    if (this.inner.releaseSavepoint === undefined) throw new Error('this dialect has no savepoints')
    return this.inner.releaseSavepoint(unwrap(connection), name, compile)
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    return this.inner.releaseConnection(unwrap(connection))
  }

  destroy(): Promise<void> {
    return this.inner.destroy()
  }
}

const unwrap = (connection: DatabaseConnection): DatabaseConnection => (connection instanceof TextCodecConnection ? connection.inner : connection)
