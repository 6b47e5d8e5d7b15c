import { quoteName } from '@agentvisor/core'
import { createInterface, type Interface } from 'node:readline/promises'
import type { Approver } from '@agentvisor/actors'
import { terminalSafe } from './terminal-text.js'

const ANSWERS: Readonly<Record<string, { decision: 'approve' | 'deny'; remember: boolean }>> = {
  y: { decision: 'approve', remember: false },
  yes: { decision: 'approve', remember: false },
  n: { decision: 'deny', remember: false },
  no: { decision: 'deny', remember: false },
  a: { decision: 'approve', remember: true },
  always: { decision: 'approve', remember: true },
  d: { decision: 'deny', remember: true },
  never: { decision: 'deny', remember: true }
}

/**
 * Closes the prompt when `signal` aborts (someone decided over NATS, with `agentvisor approve`
 * or in the inspector first), saying so: the pending `question` then rejects, and the run goes
 * on with the other decision.
 */
const withdrawnWith = (rl: Interface, signal: AbortSignal | undefined, why: string): void => {
  signal?.addEventListener(
    'abort',
    () => {
      process.stderr.write(`\n(${why})\n`)
      rl.close()
    },
    { once: true }
  )
}

/**
 * `approval: prompt` on a terminal: asks on stderr, reads stdin. Without a TTY on both there is
 * no one to ask, so it returns undefined and the run defers (pauses, exit 3) instead.
 */
export const terminalApprover = (): Approver | undefined => {
  if (process.stdin.isTTY !== true || process.stderr.isTTY !== true) return undefined
  return {
    source: 'prompt',
    decide: async (request, signal) => {
      const rl = createInterface({ input: process.stdin, output: process.stderr })
      withdrawnWith(rl, signal, 'the request was decided elsewhere')
      // Ctrl-C at the prompt cancels the run like anywhere else.
      rl.on('SIGINT', () => {
        rl.close()
        process.kill(process.pid, 'SIGINT')
      })
      try {
        // The target is the model's (a command, a path): shown, never acted on by the terminal.
        const safe = (text: string): string => terminalSafe(text)
        process.stderr.write(
          `\n${safe(request.tool)} wants to ${safe(request.act)}: ${safe(request.target)}\n  (rule ${quoteName(request.rule)} in layer ${quoteName(request.layer)} asks)\n`
        )
        for (;;) {
          const line = (await rl.question('approve? [y]es, [n]o, [a]lways, [d]eny always: ')).trim().toLowerCase()
          const answer = ANSWERS[line]
          if (answer !== undefined) return answer
        }
      } finally {
        rl.close()
      }
    },
    // A question the model asked (`ask_human`): asked here, the line typed is the answer; an empty
    // line leaves it open (the run pauses, exit 3, for `agentvisor answer`).
    answer: async (question, signal) => {
      const rl = createInterface({ input: process.stdin, output: process.stderr })
      withdrawnWith(rl, signal, 'the question was answered elsewhere')
      rl.on('SIGINT', () => {
        rl.close()
        process.kill(process.pid, 'SIGINT')
      })
      try {
        process.stderr.write(`\nthe model asks: ${terminalSafe(question.question, true)}\n`)
        const line = (await rl.question('your answer (empty: answer later): ')).trim()
        return line === '' ? undefined : line
      } finally {
        rl.close()
      }
    }
  }
}
