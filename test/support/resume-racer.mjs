// One contender in a lease race: opens an Agentvisor on the store given as argv[2], prints
// `{"ready":true}`, waits for a line on stdin (the start signal, sent to every contender at
// once), then resumes run argv[3]. Prints one JSON line with what happened: `{"drove":true}` and
// later `{"result":...}`, or `{"error":"<tag>","message":"..."}`. Plain ESM on the built
// packages, so it starts like a user's script would.
import { createInterface } from 'node:readline'
import { Agentvisor } from '@agentvisor/actors'

const [db, runId] = process.argv.slice(2)
const say = (value) => process.stdout.write(`${JSON.stringify(value)}\n`)

const av = await Agentvisor.open({ db })
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]()
say({ ready: true })
await lines.next()
try {
  const run = await av.resume(runId)
  say({ drove: true })
  say({ result: await run.result })
} catch (error) {
  say({ error: error?._tag ?? 'Error', message: String(error?.message ?? error).split('\n')[0] })
} finally {
  await av.close()
  process.stdin.destroy()
}
