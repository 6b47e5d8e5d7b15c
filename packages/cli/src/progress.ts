import type { RunObserver } from '@agentvisor/actors'
import { elapsed, say } from './output.js'

const short = (runId: string): string => runId.slice(0, 8)

const oneLine = (text: string, max = 100): string => {
  const flat = text.replace(/\s+/g, ' ').trim()
  return flat.length > max ? `${flat.slice(0, max - 3)}...` : flat
}

/** Progress lines on stderr: the step, the state, the provider asked, the tool being run. */
export const progressObserver = (startedAt: number): RunObserver => ({
  onDispatch: ({ runId, step, attempt, provider, reason }) =>
    say(`[${short(runId)}] step ${step}: asking ${provider}${reason === 'initial' ? '' : ` (${reason}, attempt ${attempt + 1})`}`),
  onToolCall: ({ runId, step, name, target }) => say(`[${short(runId)}] step ${step}: ${name}${target === '' ? '' : ` ${oneLine(target, 80)}`}`),
  onToolResult: ({ runId, step, name, ok, output }) => {
    if (!ok) say(`[${short(runId)}] step ${step}: ${name} refused: ${oneLine(output)}`)
  },
  onTransition: ({ runId, from, event, to }) => say(`[${short(runId)}] ${from} --${event}--> ${to}  (${elapsed(startedAt)})`)
})
