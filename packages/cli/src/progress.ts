import type { RunObserver } from '@agentvisor/actors'
import { elapsed, say } from './output.js'
import { terminalSafe } from './terminal-text.js'

const short = (runId: string): string => runId.slice(0, 8)

const oneLine = (text: string, max = 100): string => {
  const flat = text.replace(/\s+/g, ' ').trim()
  return flat.length > max ? `${flat.slice(0, max - 3)}...` : flat
}

/**
 * Progress on stderr: the step, the state, the provider asked, the tool being run, and the model's
 * text as it streams (docs/streaming.md), on a line of its own that the next progress line ends.
 */
export const progressObserver = (startedAt: number): RunObserver => {
  /** The call whose text is being written, until another line comes. */
  let streaming: string | undefined
  const line = (text: string): void => {
    if (streaming !== undefined) process.stderr.write('\n')
    streaming = undefined
    say(text)
  }
  return {
    onDispatch: ({ runId, step, attempt, provider, reason }) =>
      line(`[${short(runId)}] step ${step}: asking ${provider}${reason === 'initial' ? '' : ` (${reason}, attempt ${attempt + 1})`}`),
    onText: ({ runId, step, attempt, delta }) => {
      const call = `${runId}/${step}/${attempt}`
      if (streaming !== call) {
        if (streaming !== undefined) process.stderr.write('\n')
        process.stderr.write(`[${short(runId)}] says: `)
        streaming = call
      }
      // Line breaks of the answer stay line breaks; anything a terminal would act on is shown, not acted on.
      process.stderr.write(terminalSafe(delta, true))
    },
    onToolCall: ({ runId, step, name, target }) => line(`[${short(runId)}] step ${step}: ${name}${target === '' ? '' : ` ${oneLine(target, 80)}`}`),
    onToolResult: ({ runId, step, name, ok, output }) => {
      if (!ok) line(`[${short(runId)}] step ${step}: ${name} refused: ${oneLine(output)}`)
    },
    onTransition: ({ runId, from, event, to }) => line(`[${short(runId)}] ${from} --${event}--> ${to}  (${elapsed(startedAt)})`),
    onFinished: () => {
      if (streaming !== undefined) process.stderr.write('\n')
      streaming = undefined
    }
  }
}
