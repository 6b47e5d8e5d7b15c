// A supervising service in a page (docs/nats.md, "Supervising runs from other services"): it
// hears every request any run pauses on, anywhere in any tree, approves writes under docs/ and
// denies everything else, one log line each. It holds no store and drives no run: the workers
// (or whoever drives a run) act on its decisions.
//
//   node examples/supervisor/approval-bot.mjs nats://127.0.0.1:4222
//
// Authentication and subject prefix come from the environment, as for `agentvisor worker`
// (AGENTVISOR_NATS_USER/_PASS, _TOKEN, _CREDS, _PREFIX; docs/nats.md). With docs/nats-auth.conf,
// log in as `supervisor`.
import { AgentvisorClient, natsBusOptionsFromEnv } from '@agentvisor/actors'

const options = natsBusOptionsFromEnv({ nats: process.argv[2] })
if (options === undefined) {
  console.error('usage: node examples/supervisor/approval-bot.mjs NATS_URL (or AGENTVISOR_NATS_URL)')
  process.exit(2)
}

/** The rule this service applies: a write inside docs/ is fine, anything else is not. */
const allowed = (request) =>
  request.kind === 'approval' &&
  request.act === 'write' &&
  typeof request.target === 'string' &&
  request.target.startsWith('docs/') &&
  !request.target.split('/').includes('..')

const client = await AgentvisorClient.connect({ ...options, name: 'approval-bot' })
const stop = await client.requests(async ({ runId, rootId, request }) => {
  // Questions and recovery decisions are for people (agentvisor answer / approve --retry).
  if (request.kind !== 'approval') return console.log(`run ${runId} (tree ${rootId}): ${request.kind} request ${request.id} left to a person`)
  const decision = allowed(request) ? 'approve' : 'deny'
  try {
    await client.approve(runId, { requestId: request.id, decision })
    console.log(`run ${runId} (tree ${rootId}): ${decision === 'approve' ? 'approved' : 'denied'} ${request.act} ${request.target ?? ''}`)
  } catch (error) {
    // Someone else decided first, or the run ended: nothing to do.
    console.log(`run ${runId}: request ${request.id} not decided here: ${error.message}`)
  }
})
console.log('approval-bot: listening for requests')

const shutdown = async () => {
  await stop()
  await client.close()
  process.exit(0)
}
process.once('SIGINT', shutdown)
process.once('SIGTERM', shutdown)
