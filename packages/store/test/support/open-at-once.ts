import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { expect } from 'vitest'

/**
 * Opens the store at `location` from `count` processes at the same moment (fixtures/
 * open-store-on-go.ts: each says `ready`, waits for `go`, opens and closes the store, says `ok`),
 * and waits until all have opened it and exited.
 */
export async function openAtOnce(location: string, count = 3): Promise<void> {
  const fixture = fileURLToPath(new URL('../fixtures/open-store-on-go.ts', import.meta.url))
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, ['--import', 'tsx', fixture, location], {
      cwd: fileURLToPath(new URL('../../../..', import.meta.url)),
      stdio: ['pipe', 'pipe', 'inherit']
    })
  )
  const lines = children.map((child) => createInterface({ input: child.stdout })[Symbol.asyncIterator]())
  const nextLine = async (index: number): Promise<string> => String((await lines[index]?.next())?.value)

  expect(await Promise.all(children.map((_, index) => nextLine(index)))).toEqual(children.map(() => 'ready'))
  for (const child of children) child.stdin.write('go\n')
  expect(await Promise.all(children.map((_, index) => nextLine(index)))).toEqual(children.map(() => 'ok'))
  await Promise.all(children.map((child) => (child.exitCode === null ? once(child, 'exit') : undefined)))
}
