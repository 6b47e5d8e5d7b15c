import { readFile } from 'node:fs/promises'
import * as path from 'node:path'
import { Effect, Either } from 'effect'
import { parse as parseYaml } from 'yaml'
import { ContractError } from '../errors.js'
import { parseTaskContract, type TaskContract } from './task-contract.js'

/** Parses task file text: JSON for `.json`, YAML (a superset of JSON) for everything else. */
export const parseTaskText = (text: string, file: string): Either.Either<unknown, ContractError> => {
  try {
    return Either.right(file.endsWith('.json') ? JSON.parse(text) : parseYaml(text))
  } catch (error) {
    const detail = error instanceof Error ? error.message.split('\n')[0] : String(error)
    return Either.left(new ContractError({ message: `not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${detail}`, source: file }))
  }
}

/** Reads and validates a task file; the workspace resolves against the file's folder. */
export const loadTaskFile = (file: string): Effect.Effect<TaskContract, ContractError> =>
  Effect.gen(function* () {
    const text = yield* Effect.tryPromise({
      try: () => readFile(file, 'utf8'),
      catch: (error) =>
        new ContractError({
          message: `cannot read task file: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
          source: file
        })
    })
    const raw = yield* parseTaskText(text, file)
    return yield* parseTaskContract(raw, path.dirname(path.resolve(file)), file)
  })
