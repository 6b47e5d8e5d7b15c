import { constants } from 'node:fs'
import { open } from 'node:fs/promises'
import * as path from 'node:path'
import { Effect, Either } from 'effect'
import { parse as parseYaml } from 'yaml'
import { ContractError } from '../errors.js'
import { isStackOverflow, MAX_NESTING_DEPTH } from './nesting.js'
import { parseTaskContract } from './task-contract.js'
import type { TaskContract } from './task-shape.js'

/** Parses task file text: JSON for `.json`, YAML (a superset of JSON) for everything else. */
export const parseTaskText = (text: string, file: string): Either.Either<unknown, ContractError> => {
  const format = file.endsWith('.json') ? 'JSON' : 'YAML'
  try {
    // `logLevel: 'error'`: YAML's warnings (an unknown tag, ...) would print on stderr through
    // process.emitWarning; errors still throw.
    return Either.right(format === 'JSON' ? JSON.parse(text) : parseYaml(text, { logLevel: 'error' }))
  } catch (error) {
    // The YAML parser recurses per level and overflows long before a file is large.
    if (isStackOverflow(error)) {
      return Either.left(
        new ContractError({ message: `the file nests deeper than ${MAX_NESTING_DEPTH} levels of objects and lists (the most a task may)`, source: file })
      )
    }
    const detail = error instanceof Error ? error.message.split('\n')[0] : String(error)
    return Either.left(new ContractError({ message: `not valid ${format}: ${detail}`, source: file }))
  }
}

/** A path that names something other than a regular file (a folder, a FIFO, a device). */
class NotRegularFile extends Error {}

/**
 * The text of a task file. Opened non-blocking and checked to be a regular file before any read:
 * a FIFO or a device would block forever or never end (docs/task-file.md).
 */
const readTaskText = async (file: string): Promise<string> => {
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK)
  try {
    const stat = await handle.stat()
    if (!stat.isFile()) throw new NotRegularFile(stat.isDirectory() ? 'it is a folder' : 'not a regular file')
    return await handle.readFile('utf8')
  } finally {
    await handle.close()
  }
}

/** Reads and validates a task file; the workspace resolves against the file's folder. */
export const loadTaskFile = (file: string): Effect.Effect<TaskContract, ContractError> =>
  Effect.gen(function* () {
    const text = yield* Effect.tryPromise({
      try: () => readTaskText(file),
      catch: (error) =>
        new ContractError({
          message: `cannot read task file: ${error instanceof NotRegularFile ? error.message : ((error as NodeJS.ErrnoException).code ?? String(error))}`,
          source: file
        })
    })
    const raw = yield* parseTaskText(text, file)
    return yield* parseTaskContract(raw, path.dirname(path.resolve(file)), file)
  })
